//! A hostile or broken provider, against fake servers on loopback: a reply with two answers, a
//! reply whose reported usage passes a cap, an echoed key cut anywhere, a reply that drips until
//! the time budget runs out, and an "all passed, cite nothing" reply. None of them completes.
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
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use verdict_core::contracts::{UnavailableReason, VerificationStatus};
use verdict_judge::config::{Budget, Price, ProviderConfig, Sampling};
use verdict_judge::provider::{AnthropicProvider, OpenAiProvider, Provider};
use verdict_judge::secret::Secret;
use verdict_judge::{Judge, JudgeRun};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    OpenAi,
    Anthropic,
}

const BOTH: [Proto; 2] = [Proto::OpenAi, Proto::Anthropic];

/// A 96-character key with no repeated 12-character run, so any run found in output is a leak.
fn long_key() -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let body: String = (0..93)
        .map(|i| char::from(alphabet[(i * 17 + i / 7) % alphabet.len()]))
        .collect();
    format!("sk-{body}")
}

fn provider(p: Proto, url: &str, key: &str) -> Arc<dyn Provider> {
    match p {
        Proto::OpenAi => Arc::new(
            OpenAiProvider::new(url, "judge-model", Some(Secret::new(key.into())), Some(0.0))
                .unwrap(),
        ),
        Proto::Anthropic => Arc::new(
            AnthropicProvider::new(
                url,
                "claude-test",
                Secret::new(key.into()),
                "2023-06-01",
                Some(0.0),
            )
            .unwrap(),
        ),
    }
}

fn judge_with(
    p: Proto,
    url: &str,
    key: &str,
    budget: Budget,
    sampling: Sampling,
    price: Option<Price>,
) -> Judge {
    let cfg = ProviderConfig::Openai {
        base_url: url.to_owned(),
        model: "judge-model".into(),
        api_key_env: None,
        temperature: Some(0.0),
        price,
    };
    Judge::new(class_with(cfg, budget, sampling), provider(p, url, key)).unwrap()
}

fn judge(p: Proto, url: &str) -> Judge {
    judge_with(p, url, &long_key(), budget(), Sampling::default(), None)
}

fn envelope(p: Proto, reply: &Value) -> Value {
    match p {
        Proto::OpenAi => openai_envelope(&reply.to_string()),
        Proto::Anthropic => anthropic_envelope(reply),
    }
}

/// A failing reply for the standard request: every criterion failed.
fn failing_reply(nonce: &str) -> Value {
    let mut r = good_reply(nonce);
    for row in r["criteria"].as_array_mut().unwrap() {
        row["status"] = json!("failed");
    }
    r
}

fn assert_unavailable(run: &JudgeRun, reason: UnavailableReason, detail_has: &str, case: &str) {
    assert_eq!(
        run.result.status,
        VerificationStatus::Unavailable,
        "{case}: {:?}",
        run.detail
    );
    assert_eq!(
        run.result.unavailable_reason,
        Some(reason),
        "{case}: {:?}",
        run.detail
    );
    assert!(run.result.criteria.is_empty(), "{case}: rows kept");
    let detail = run.detail.as_deref().unwrap_or_default();
    assert!(
        detail.contains(detail_has),
        "{case}: detail {detail:?} lacks {detail_has:?}"
    );
}

/// Whether `text` shows any 12 consecutive characters of `key`.
fn shows_run_of(text: &str, key: &str) -> Option<String> {
    let min = verdict_judge::secret::MIN_RUN;
    (0..=key.len() - min)
        .map(|i| &key[i..i + min])
        .find(|run| text.contains(run))
        .map(str::to_owned)
}

// ---- 6: one answer per reply ----

#[tokio::test]
async fn a_reply_with_two_answers_is_invalid_output_and_none_is_read() {
    for p in BOTH {
        // First answer: all passed. Second: all failed. Neither may be read.
        let server = FakeServer::start(move |r| {
            let pass = good_reply(&r.nonce());
            let fail = failing_reply(&r.nonce());
            let mut env = envelope(p, &pass);
            match p {
                Proto::OpenAi => {
                    let mut second = env["choices"][0].clone();
                    second["index"] = json!(1);
                    second["message"]["content"] = json!(fail.to_string());
                    env["choices"].as_array_mut().unwrap().push(second);
                }
                Proto::Anthropic => {
                    let mut second = env["content"][0].clone();
                    second["id"] = json!("toolu_2");
                    second["input"] = fail;
                    env["content"].as_array_mut().unwrap().push(second);
                }
            }
            Answer::json(&env)
        })
        .await;
        let run = judge(p, &server.url).run(&request()).await.unwrap();
        let want = match p {
            Proto::OpenAi => "2 choices",
            Proto::Anthropic => "2 tool calls",
        };
        assert_unavailable(
            &run,
            UnavailableReason::InvalidOutput,
            want,
            &format!("{p:?}"),
        );
        assert_eq!(
            run.receipts.len(),
            1,
            "{p:?}: a broken reply is not retried"
        );
        assert_eq!(run.receipts[0].outcome, "invalid_output");
        assert!(
            run.receipts[0]
                .detail
                .as_deref()
                .is_some_and(|d| d.contains(want)),
            "{p:?}: the receipt keeps the detail"
        );

        // What was asked for: one answer.
        let body = &server.received()[0].body;
        match p {
            Proto::OpenAi => assert_eq!(body["n"], json!(1)),
            Proto::Anthropic => {
                assert_eq!(body["tool_choice"]["type"], "tool");
                assert_eq!(
                    body["tool_choice"]["disable_parallel_tool_use"],
                    json!(true)
                );
            }
        }
    }
}

#[tokio::test]
async fn a_tool_call_beside_the_content_is_a_second_answer() {
    let server = FakeServer::start(|r| {
        let mut env = openai_envelope(&good_reply(&r.nonce()).to_string());
        env["choices"][0]["message"]["tool_calls"] = json!([{"id": "call_1", "type": "function",
            "function": {"name": "approve", "arguments": "{}"}}]);
        Answer::json(&env)
    })
    .await;
    let run = judge(Proto::OpenAi, &server.url)
        .run(&request())
        .await
        .unwrap();
    assert_unavailable(
        &run,
        UnavailableReason::InvalidOutput,
        "1 tool call(s) besides its content",
        "tool call",
    );
}

#[tokio::test]
async fn a_second_tool_call_of_another_tool_is_a_second_answer_too() {
    let server = FakeServer::start(|r| {
        let mut env = anthropic_envelope(&good_reply(&r.nonce()));
        env["content"].as_array_mut().unwrap().insert(
            0,
            json!({"type": "tool_use", "id": "toolu_0", "name": "approve_merge", "input": {}}),
        );
        Answer::json(&env)
    })
    .await;
    let run = judge(Proto::Anthropic, &server.url)
        .run(&request())
        .await
        .unwrap();
    assert_unavailable(
        &run,
        UnavailableReason::InvalidOutput,
        "2 tool calls",
        "two tools",
    );
}

// ---- 7: budgets after every call ----

/// An envelope that reports `tokens_out` output tokens.
fn reporting(p: Proto, nonce: &str, tokens_out: u64) -> Value {
    let mut env = envelope(p, &good_reply(nonce));
    match p {
        Proto::OpenAi => env["usage"]["completion_tokens"] = json!(tokens_out),
        Proto::Anthropic => env["usage"]["output_tokens"] = json!(tokens_out),
    }
    env
}

#[tokio::test]
async fn usage_past_the_token_cap_is_budget_exhausted_never_a_result() {
    for p in BOTH {
        let server =
            FakeServer::start(move |r| Answer::json(&reporting(p, &r.nonce(), 900_000))).await;
        let b = Budget {
            max_total_tokens: Some(20_000),
            ..budget()
        };
        let j = judge_with(p, &server.url, &long_key(), b, Sampling::default(), None);
        let run = j.run(&request()).await.unwrap();
        assert_unavailable(
            &run,
            UnavailableReason::BudgetExhausted,
            "900000 out",
            &format!("{p:?} tokens"),
        );
        assert_eq!(run.receipts.len(), 1);
        assert_eq!(run.receipts[0].outcome, "budget_exhausted");
        assert_eq!(run.receipts[0].tokens_out, Some(900_000));
    }
}

#[tokio::test]
async fn usage_no_call_can_reach_is_refused_and_never_charged() {
    let price = Price {
        input_per_mtok: 1.0,
        output_per_mtok: 1.0,
    };
    for p in BOTH {
        // Each count is a number a document may hold; their sum is not.
        let server = FakeServer::start(move |r| {
            let mut env = reporting(p, &r.nonce(), 9_007_199_254_740_991);
            match p {
                Proto::OpenAi => env["usage"]["prompt_tokens"] = json!(9_007_199_254_740_991_u64),
                Proto::Anthropic => env["usage"]["input_tokens"] = json!(9_007_199_254_740_991_u64),
            }
            Answer::json(&env)
        })
        .await;
        let j = judge_with(
            p,
            &server.url,
            &long_key(),
            budget(),
            Sampling::default(),
            Some(price),
        );
        let run = j.run(&request()).await.unwrap();
        assert_unavailable(
            &run,
            UnavailableReason::ProviderError,
            "reports 9007199254740991 input tokens for one call, more than the 1000000000",
            &format!("{p:?} usage"),
        );
        assert_eq!(server.received().len(), 1, "{p:?}: not retried");
        let r = &run.receipts[0];
        assert_eq!(r.outcome, "protocol_error", "{p:?}");
        assert_eq!(
            (r.tokens_in, r.tokens_out, r.tokens_charged, r.cost_estimate),
            (None, None, None, None),
            "{p:?}"
        );
        // At the bound a count is believed and charged.
        let server = FakeServer::start(move |r| {
            Answer::json(&reporting(
                p,
                &r.nonce(),
                verdict_judge::tokens::MAX_REPORTED_TOKENS,
            ))
        })
        .await;
        let j = judge_with(
            p,
            &server.url,
            &long_key(),
            budget(),
            Sampling::default(),
            Some(price),
        );
        let run = j.run(&request()).await.unwrap();
        assert_eq!(
            run.result.status,
            VerificationStatus::Completed,
            "{p:?}: {:?}",
            run.detail
        );
        assert_eq!(
            run.receipts[0].tokens_out,
            Some(verdict_judge::tokens::MAX_REPORTED_TOKENS)
        );
    }
}

#[tokio::test]
async fn u0000_in_an_error_body_is_escaped_in_the_detail_and_the_receipts() {
    for p in BOTH {
        let server =
            FakeServer::start(|_| Answer::raw(500, "{\"error\":\"boom\u{0}\\u0000\"}")).await;
        let j = judge_with(
            p,
            &server.url,
            &long_key(),
            budget(),
            Sampling::default(),
            None,
        );
        let run = j.run(&request()).await.unwrap();
        assert_unavailable(
            &run,
            UnavailableReason::ProviderError,
            "boom[U+0000]\\u0000",
            &format!("{p:?} nul"),
        );
        assert!(!run.receipts.is_empty());
        for r in &run.receipts {
            let d = r.detail.as_deref().unwrap();
            assert!(
                d.contains("boom[U+0000]") && !d.contains('\0'),
                "{p:?}: {d}"
            );
        }
        assert!(!run.detail.as_deref().unwrap().contains('\0'));
    }
}

/// Terminal escape sequences a provider could send to the operator's screen: clear the screen,
/// set the window title, a carriage return and a line of its own, a C1 control sequence, DEL.
const ESCAPES: &str = "\u{1b}[2J\u{1b}]0;pwned\u{7}\r\nPASS reviewer\u{9b}31m\u{7f}\t";

/// Every text of `run` that a provider could have written into: the detail and each receipt's.
fn provider_texts(run: &JudgeRun) -> Vec<String> {
    let mut texts: Vec<String> = run.detail.iter().cloned().collect();
    texts.extend(run.receipts.iter().filter_map(|r| r.detail.clone()));
    texts
}

fn assert_no_control(run: &JudgeRun, shown: &str, case: &str) {
    let texts = provider_texts(run);
    assert!(!texts.is_empty(), "{case}: nothing kept");
    for t in &texts {
        assert!(!t.chars().any(char::is_control), "{case}: {t:?}");
    }
    let detail = run.detail.as_deref().unwrap_or_default();
    assert!(detail.contains(shown), "{case}: {detail:?} lacks {shown:?}");
}

#[tokio::test]
async fn control_characters_a_provider_sends_are_shown_escaped_in_every_detail() {
    for p in BOTH {
        // An error body full of escape sequences, retried and given up on.
        let server =
            FakeServer::start(|_| Answer::raw(500, &format!("{{\"error\":\"{ESCAPES}\"}}"))).await;
        let run = judge(p, &server.url).run(&request()).await.unwrap();
        assert_eq!(
            run.result.unavailable_reason,
            Some(UnavailableReason::ProviderError),
            "{p:?}"
        );
        assert_eq!(run.receipts.len(), 3, "{p:?}: retried");
        assert_no_control(
            &run,
            "[U+001B][2J[U+001B]]0;pwned[U+0007][U+000D][U+000A]PASS reviewer[U+009B]31m[U+007F][U+0009]",
            &format!("{p:?} error body"),
        );

        // A reply with an unexpected property whose name holds the escapes: the schema's
        // message names it.
        let server = FakeServer::start(move |r| {
            let mut reply = good_reply(&r.nonce());
            reply[format!("x{ESCAPES}")] = json!(1);
            Answer::json(&envelope(p, &reply))
        })
        .await;
        let run = judge(p, &server.url).run(&request()).await.unwrap();
        assert_unavailable(
            &run,
            UnavailableReason::InvalidOutput,
            "result schema",
            &format!("{p:?} property"),
        );
        assert_no_control(&run, "x[U+001B][2J", &format!("{p:?} property"));
    }

    // An Anthropic block beside the call whose type is the escapes: the message lists it.
    let server = FakeServer::start(|r| {
        let mut env = anthropic_envelope(&good_reply(&r.nonce()));
        env["content"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": ESCAPES}));
        Answer::json(&env)
    })
    .await;
    let run = judge(Proto::Anthropic, &server.url)
        .run(&request())
        .await
        .unwrap();
    assert_unavailable(
        &run,
        UnavailableReason::InvalidOutput,
        "besides the",
        "block type",
    );
    assert_no_control(&run, "[U+001B]]0;pwned", "block type");
}

#[tokio::test]
async fn cost_past_the_cap_is_budget_exhausted_never_a_result() {
    // 900,000 output tokens at 30 per million: 27 against a cap of 0.50.
    let price = Price {
        input_per_mtok: 0.0,
        output_per_mtok: 30.0,
    };
    for p in BOTH {
        let server =
            FakeServer::start(move |r| Answer::json(&reporting(p, &r.nonce(), 900_000))).await;
        let b = Budget {
            max_cost: Some(0.5),
            ..budget()
        };
        let j = judge_with(
            p,
            &server.url,
            &long_key(),
            b,
            Sampling::default(),
            Some(price),
        );
        let run = j.run(&request()).await.unwrap();
        assert_unavailable(
            &run,
            UnavailableReason::BudgetExhausted,
            "cost budget",
            &format!("{p:?} cost"),
        );
        let cost = run.receipts[0].cost_estimate.unwrap();
        assert!((cost - 27.0).abs() < 1e-9, "{cost}");
        assert_eq!(run.receipts[0].outcome, "budget_exhausted");
    }
}

#[tokio::test]
async fn usage_is_summed_across_samples_and_unreported_usage_is_estimated() {
    // Three samples of 1,200 + 8,000 tokens each against 25,000: the third fits before its call
    // and passes the cap after it. Two valid samples would do (k = 2), but a run that spent past
    // its cap is budget_exhausted, not a result of the samples that came first.
    let server =
        FakeServer::start(|r| Answer::json(&reporting(Proto::OpenAi, &r.nonce(), 8_000))).await;
    let b = Budget {
        max_total_tokens: Some(25_000),
        ..budget()
    };
    let j = judge_with(
        Proto::OpenAi,
        &server.url,
        &long_key(),
        b,
        Sampling { n: 3, k: Some(2) },
        None,
    );
    let run = j.run(&request()).await.unwrap();
    assert_unavailable(
        &run,
        UnavailableReason::BudgetExhausted,
        "token budget",
        "samples",
    );
    assert_eq!(run.receipts.len(), 3);

    // A provider that reports no usage is counted by the estimate of what it sent back: a long
    // reply cannot pass a cap by leaving its usage out.
    let server = FakeServer::start(|r| {
        let mut reply = good_reply(&r.nonce());
        reply["criteria"][0]["rationale"] = json!("x".repeat(3_900));
        let mut env = openai_envelope(&reply.to_string());
        env.as_object_mut().unwrap().remove("usage");
        Answer::json(&env)
    })
    .await;
    let probe = judge(Proto::OpenAi, &server.url);
    let prompt_tokens = verdict_judge::judge::plan_request(probe.class(), &request())
        .unwrap()
        .manifest
        .construction
        .estimated_tokens;
    let b = Budget {
        max_total_tokens: Some(prompt_tokens + 500),
        ..budget()
    };
    let j = judge_with(
        Proto::OpenAi,
        &server.url,
        &long_key(),
        b,
        Sampling::default(),
        None,
    );
    let run = j.run(&request()).await.unwrap();
    assert_unavailable(
        &run,
        UnavailableReason::BudgetExhausted,
        "token budget",
        "unreported usage",
    );
}

// ---- 8: redact before clipping ----

#[tokio::test]
async fn an_echoed_key_leaves_no_run_wherever_the_cut_falls() {
    let key = long_key();
    assert_eq!(key.len(), 96);
    for p in BOTH {
        // The error body is cut at 512 bytes; the echo is placed so that the cut falls at every
        // offset inside the key, and just before and after it.
        let server = FakeServer::start(move |r| {
            let creds = r
                .header("authorization")
                .or_else(|| r.header("x-api-key"))
                .unwrap_or_default();
            let creds = creds.trim_start_matches("Bearer ");
            // The excerpt is of the trimmed body, so the padding is not blank. The key starts
            // at byte `pad + lead.len()`; request `i` puts the cut at offset `i - 1` of the key.
            let lead = "{\"error\": \"rejected: Authorization: Bearer ";
            let pad = 512 + 1 - lead.len() - r.index;
            let body = format!("{}{lead}{creds}\"}}", "x".repeat(pad));
            Answer::raw(401, &body)
        })
        .await;
        let b = Budget {
            max_attempts: 1,
            ..budget()
        };
        let j = judge_with(p, &server.url, &key, b, Sampling::default(), None);
        for offset in 0..=97 {
            let run = j.run(&request()).await.unwrap();
            assert_eq!(
                run.result.unavailable_reason,
                Some(UnavailableReason::ProviderError),
                "{p:?} offset {offset}: {:?}",
                run.detail
            );
            // Not even a few characters of the key: what follows "Bearer " is the marker, or
            // the part of it the cut left.
            let detail = run.detail.clone().unwrap_or_default();
            if let Some(at) = detail.find("Bearer ") {
                let shown = detail[at + "Bearer ".len()..].trim_end_matches("...");
                assert!(
                    "[redacted]\"}".starts_with(shown),
                    "{p:?} offset {offset}: {detail:?}"
                );
            }
            let everything = format!("{run:?}\n{}", serde_json::to_string(&run).unwrap());
            if let Some(leak) = shows_run_of(&everything, &key) {
                panic!(
                    "{p:?} offset {offset}: {leak:?} of the key is shown: {:?}",
                    run.detail
                );
            }
        }
        assert_eq!(server.received().len(), 98);
    }

    // A reply whose nonce is the key, and a refusal that quotes it: both quoted in errors.
    for p in BOTH {
        let key2 = key.clone();
        let server = FakeServer::start(move |r| {
            if r.index == 0 {
                let mut reply = good_reply(&key2);
                reply["criteria"][0]["rationale"] = json!(key2.clone());
                return Answer::json(&envelope(p, &reply));
            }
            let env = match p {
                Proto::OpenAi => json!({"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": format!("no, {key2}")}, "finish_reason": "stop"}]}),
                Proto::Anthropic => json!({"model": "m", "content": [{"type": "text", "text": format!("no, {key2}")}], "stop_reason": "refusal"}),
            };
            Answer::json(&env)
        })
        .await;
        let j = judge(p, &server.url);
        for case in ["nonce", "refusal"] {
            let run = j.run(&request()).await.unwrap();
            assert_eq!(
                run.result.unavailable_reason,
                Some(UnavailableReason::InvalidOutput),
                "{p:?} {case}"
            );
            let everything = format!("{run:?}\n{}", serde_json::to_string(&run).unwrap());
            assert!(
                shows_run_of(&everything, &key).is_none(),
                "{p:?} {case}: {:?}",
                run.detail
            );
            assert!(
                run.detail
                    .as_deref()
                    .unwrap_or_default()
                    .contains("[redacted]"),
                "{p:?} {case}: {:?}",
                run.detail
            );
        }
    }
}

// ---- 11: a slow drip is a timeout ----

/// A server that answers 200 with a long body and sends it one byte every 20 ms.
async fn dripping_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                // Read the whole request first, so the client is waiting on the answer.
                let mut got = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    let Ok(n) = sock.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len: usize = text[..end]
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse().ok())
                                    .flatten()
                            })
                            .unwrap_or(0);
                        if got.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{";
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                loop {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    if sock.write_all(b" ").await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}/v1")
}

#[tokio::test]
async fn a_slow_drip_that_runs_out_the_time_budget_is_always_a_timeout() {
    let url = dripping_server().await;
    for p in BOTH {
        let b = Budget {
            timeout_s: 0.25,
            ..budget()
        };
        let j = judge_with(p, &url, &long_key(), b, Sampling::default(), None);
        for attempt in 0..8 {
            let run = j.run(&request()).await.unwrap();
            assert_unavailable(
                &run,
                UnavailableReason::Timeout,
                "time budget",
                &format!("{p:?} run {attempt}"),
            );
            assert_eq!(run.receipts.len(), 1);
            assert_eq!(run.receipts[0].outcome, "timeout");
        }
    }
}

// ---- 12: a pass cites refs unless the policy waives it ----

fn cite_nothing(nonce: &str) -> Value {
    json!({
        "nonce": nonce,
        "criteria": [
            row("tests-pass", "passed", &[]),
            row("no-regression", "passed", &[]),
            row("docs-updated", "passed", &[]),
        ],
        "findings": [],
        "dispositions": []
    })
}

#[tokio::test]
async fn all_passed_citing_nothing_is_invalid_output_unless_waived() {
    for p in BOTH {
        let server =
            FakeServer::start(move |r| Answer::json(&envelope(p, &cite_nothing(&r.nonce())))).await;
        let j = judge(p, &server.url);
        let run = j.run(&request()).await.unwrap();
        assert_unavailable(
            &run,
            UnavailableReason::InvalidOutput,
            "is passed but cites no ref",
            &format!("{p:?}"),
        );

        // Waived for two of three criteria: the third still must cite.
        let mut req = request();
        req.evidence_refs_waived = vec![
            "tests-pass".parse().unwrap(),
            "no-regression".parse().unwrap(),
        ];
        let run = j.run(&req).await.unwrap();
        assert_unavailable(
            &run,
            UnavailableReason::InvalidOutput,
            "\"docs-updated\" is passed but cites no ref",
            &format!("{p:?} partly waived"),
        );

        // Waived for every criterion by the policy: the verifier accepts the bare passes.
        req.evidence_refs_waived
            .push("docs-updated".parse().unwrap());
        let run = j.run(&req).await.unwrap();
        assert_eq!(
            run.result.status,
            VerificationStatus::Completed,
            "{:?}",
            run.detail
        );
    }

    // A waiver must name a criterion of the subject.
    let mut req = request();
    req.evidence_refs_waived = vec!["security".parse().unwrap()];
    let server =
        FakeServer::start(|r| Answer::json(&openai_envelope(&good_reply(&r.nonce()).to_string())))
            .await;
    let err = judge(Proto::OpenAi, &server.url)
        .run(&req)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("\"security\""), "{err}");
    assert!(server.received().is_empty());
}

#[tokio::test]
async fn a_cost_cap_that_cannot_be_checked_makes_no_call() {
    // A cap without prices (a request's cap lowered onto a class without them): no estimate,
    // so no call and no result.
    let server =
        FakeServer::start(|r| Answer::json(&reporting(Proto::OpenAi, &r.nonce(), 10))).await;
    let b = Budget {
        max_cost: Some(1.0),
        ..budget()
    };
    let j = judge_with(
        Proto::OpenAi,
        &server.url,
        &long_key(),
        b,
        Sampling::default(),
        None,
    );
    let run = j.run(&request()).await.unwrap();
    assert_unavailable(
        &run,
        UnavailableReason::BudgetExhausted,
        "cannot be checked",
        "no price",
    );
    assert!(server.received().is_empty());
}

// ---- usage reported as nothing beside a long reply ----

/// An envelope around `reply` that reports no tokens at all.
fn reporting_zero(p: Proto, reply: &Value) -> Value {
    let mut env = envelope(p, reply);
    match p {
        Proto::OpenAi => env["usage"] = json!({"prompt_tokens": 0, "completion_tokens": 0}),
        Proto::Anthropic => env["usage"] = json!({"input_tokens": 0, "output_tokens": 0}),
    }
    env
}

#[tokio::test]
async fn a_reply_larger_than_the_output_cap_is_refused_whatever_usage_it_reports() {
    for p in BOTH {
        // A valid all-passed reply with 400,000 bytes in one rationale, reported as 0 tokens.
        let server = FakeServer::start(move |r| {
            let mut reply = good_reply(&r.nonce());
            reply["criteria"][0]["rationale"] = json!(" ".repeat(400_000) + "ok");
            Answer::json(&reporting_zero(p, &reply))
        })
        .await;
        let b = Budget {
            max_output_tokens: 4_096,
            max_total_tokens: Some(200_000),
            ..budget()
        };
        let j = judge_with(p, &server.url, &long_key(), b, Sampling::default(), None);
        let run = j.run(&request()).await.unwrap();
        assert_unavailable(
            &run,
            UnavailableReason::BudgetExhausted,
            "past max_output_tokens 4096",
            &format!("{p:?} oversized"),
        );
        let rc = &run.receipts[0];
        assert_eq!(rc.outcome, "budget_exhausted", "{p:?}");
        assert_eq!(
            rc.tokens_out,
            Some(0),
            "{p:?}: the report is kept as it was"
        );
        assert!(
            rc.tokens_charged.unwrap() > 100_000,
            "{p:?}: charged {:?}",
            rc.tokens_charged
        );
    }
}

#[tokio::test]
async fn usage_reported_as_zero_is_charged_at_the_estimate_of_what_was_sent_and_written() {
    let probe = judge(Proto::OpenAi, "http://127.0.0.1:9/v1");
    let prompt_tokens = verdict_judge::judge::plan_request(probe.class(), &request())
        .unwrap()
        .manifest
        .construction
        .estimated_tokens;
    for p in BOTH {
        // A reply of about 1,500 tokens of text, within the output cap, reported as 0/0.
        let long = move |r: &Received| {
            let mut reply = good_reply(&r.nonce());
            reply["criteria"][0]["rationale"] = json!("y".repeat(6_000));
            Answer::json(&reporting_zero(p, &reply))
        };
        // The token cap: the prompt and 500 more; the reply alone is three times that.
        let server = FakeServer::start(long).await;
        let b = Budget {
            max_total_tokens: Some(prompt_tokens + 500),
            ..budget()
        };
        let j = judge_with(p, &server.url, &long_key(), b, Sampling::default(), None);
        let run = j.run(&request()).await.unwrap();
        assert_unavailable(
            &run,
            UnavailableReason::BudgetExhausted,
            "token budget",
            &format!("{p:?} tokens"),
        );
        assert!(run.receipts[0].tokens_charged.unwrap() > prompt_tokens + 1_500);

        // The cost cap: 1,000 per million output tokens against 0.5, so 1,500 tokens cost 1.5.
        let server = FakeServer::start(long).await;
        let b = Budget {
            max_cost: Some(0.5),
            ..budget()
        };
        let price = Price {
            input_per_mtok: 0.0,
            output_per_mtok: 1_000.0,
        };
        let j = judge_with(
            p,
            &server.url,
            &long_key(),
            b,
            Sampling::default(),
            Some(price),
        );
        let run = j.run(&request()).await.unwrap();
        assert_unavailable(
            &run,
            UnavailableReason::BudgetExhausted,
            "cost budget",
            &format!("{p:?} cost"),
        );
        assert!(run.receipts[0].cost_estimate.unwrap() > 1.5);

        // A short reply reported as 0/0 counts, charged at the estimate, not at nothing.
        let server =
            FakeServer::start(move |r| Answer::json(&reporting_zero(p, &good_reply(&r.nonce()))))
                .await;
        let run = judge(p, &server.url).run(&request()).await.unwrap();
        assert_eq!(
            run.result.status,
            VerificationStatus::Completed,
            "{p:?}: {:?}",
            run.detail
        );
        let rc = &run.receipts[0];
        assert_eq!((rc.tokens_in, rc.tokens_out), (Some(0), Some(0)), "{p:?}");
        assert!(
            rc.tokens_charged.unwrap() > prompt_tokens,
            "{p:?}: {:?}",
            rc.tokens_charged
        );
    }
}

// ---- an echoed key, encoded ----

/// Whether `out`, with all but letters and digits taken out, holds 12 characters in a row of
/// `echo` reduced the same way.
fn shows_encoded(out: &str, echo: &str) -> bool {
    let norm = |t: &str| -> String { t.chars().filter(char::is_ascii_alphanumeric).collect() };
    let (out, echo) = (norm(out), norm(echo));
    let n = verdict_judge::secret::MIN_RUN.min(echo.len());
    (0..=echo.len() - n).any(|i| out.contains(&echo[i..i + n]))
}

#[tokio::test]
async fn a_key_echoed_encoded_split_or_reversed_is_kept_nowhere() {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    let key = long_key();
    let rev: String = key.chars().rev().collect();
    let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
    let dotted = |t: &str| {
        t.as_bytes()
            .chunks(6)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join(".")
    };
    let echoes: Vec<(&str, String)> = vec![
        ("base64", STANDARD.encode(&key)),
        (
            "base64 of the header",
            STANDARD.encode(format!("Bearer {key}")),
        ),
        ("base64 url", URL_SAFE_NO_PAD.encode(&key)),
        ("base64 split", dotted(&STANDARD.encode(&key))),
        ("hex", hex.clone()),
        ("HEX spaced", dotted(&hex.to_uppercase()).replace('.', " ")),
        ("reversed", rev.clone()),
        ("split", dotted(&key)),
        ("reversed and split", dotted(&rev)),
        (
            "base64 reversed",
            STANDARD.encode(&key).chars().rev().collect(),
        ),
    ];
    for p in BOTH {
        for (what, echo) in &echoes {
            let body = json!({"error": {"message": format!("bad key {echo}")}}).to_string();
            let server = FakeServer::start(move |_| Answer::raw(401, &body)).await;
            let run = judge(p, &server.url).run(&request()).await.unwrap();
            assert_unavailable(
                &run,
                UnavailableReason::ProviderError,
                "http status 401",
                &format!("{p:?} {what}"),
            );
            let kept = serde_json::to_string(&run).unwrap();
            assert!(
                !shows_encoded(&kept, echo),
                "{p:?} {what}: the run keeps {kept}"
            );
            let detail = run.receipts[0].detail.as_deref().unwrap();
            assert!(detail.contains("[redacted]"), "{p:?} {what}: {detail}");
        }
    }
}

/// A text a server could echo the key in: each encoding or spread made by an independent
/// encoder, with the key placed where it may fall at any alignment.
fn more_echoes(key: &str) -> Vec<(&'static str, String)> {
    use data_encoding::{BASE32, BASE32_NOPAD, BASE32HEX, BASE32HEX_NOPAD, BASE64URL, HEXUPPER};
    let crockford = {
        let mut spec = data_encoding::Specification::new();
        spec.symbols.push_str("0123456789ABCDEFGHJKMNPQRSTVWXYZ");
        spec.encoding().unwrap()
    };
    let bytes = key.as_bytes();
    let each = |f: &dyn Fn(u8) -> String| bytes.iter().map(|b| f(*b)).collect::<String>();
    let chars: Vec<String> = key.chars().map(String::from).collect();
    let alnum: Vec<String> = key
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(String::from)
        .collect();
    vec![
        ("base32", BASE32.encode(bytes)),
        ("base32 lower case", BASE32.encode(bytes).to_lowercase()),
        ("base32 without padding", BASE32_NOPAD.encode(bytes)),
        (
            "base32 after one byte",
            BASE32.encode(format!("B{key}").as_bytes()),
        ),
        (
            "base32 after four bytes",
            BASE32.encode(format!("Bear{key}").as_bytes()),
        ),
        ("base32hex", BASE32HEX.encode(bytes)),
        (
            "base32hex lower case without padding",
            BASE32HEX_NOPAD.encode(bytes).to_lowercase(),
        ),
        ("base32 crockford", crockford.encode(bytes)),
        ("base64url", BASE64URL.encode(bytes)),
        ("HEX", HEXUPPER.encode(bytes)),
        (
            "rot13",
            key.chars()
                .map(|c| match c {
                    'a'..='m' | 'A'..='M' => char::from(c as u8 + 13),
                    'n'..='z' | 'N'..='Z' => char::from(c as u8 - 13),
                    _ => c,
                })
                .collect(),
        ),
        ("upper case", key.to_uppercase()),
        ("\\x escapes", each(&|b| format!("\\x{b:02x}"))),
        ("\\u escapes", each(&|b| format!("\\u{b:04x}"))),
        ("decimal entities", each(&|b| format!("&#{b};"))),
        ("percent-encoded", each(&|b| format!("%{b:02X}"))),
        ("one character per line", chars.join("\n")),
        ("spaced out", chars.join(" ")),
        ("a filler letter between", alnum.join("q")),
        ("two filler letters between", alnum.join("zq")),
        (
            "first letter of each line",
            key.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| format!("{c} is fine\n"))
                .collect(),
        ),
        (
            "last letter of each line",
            key.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| format!("fine: {c}\n"))
                .collect(),
        ),
    ]
}

#[tokio::test]
async fn a_key_echoed_in_base32_rot13_escapes_other_case_or_spread_out_is_kept_nowhere() {
    let key = long_key();
    for p in BOTH {
        for (what, echo) in more_echoes(&key) {
            let body = format!("bad key:\n{echo}\n(rejected)");
            let server = FakeServer::start(move |_| Answer::raw(401, &body)).await;
            let run = judge(p, &server.url).run(&request()).await.unwrap();
            assert_unavailable(
                &run,
                UnavailableReason::ProviderError,
                "http status 401",
                &format!("{p:?} {what}"),
            );
            // The details as they are (a serialised form escapes line breaks into letters).
            let kept = format!(
                "{}\n{}\n{}",
                run.receipts[0].detail.as_deref().unwrap_or_default(),
                run.detail.as_deref().unwrap_or_default(),
                serde_json::to_string(&run).unwrap()
            );
            assert!(
                !shows_encoded(&kept, &echo),
                "{p:?} {what}: the run keeps {kept}"
            );
            let detail = run.receipts[0].detail.as_deref().unwrap();
            assert!(detail.contains("[redacted]"), "{p:?} {what}: {detail}");
            assert!(detail.contains("bad key"), "{p:?} {what}: {detail}");
        }
    }
}
