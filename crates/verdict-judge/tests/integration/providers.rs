//! Both HTTP protocols against fake servers on loopback: the happy path, and every failure mode
//! ending `unavailable` with its reason, never `passed` or `failed`.
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
use verdict_core::contracts::{UnavailableReason, VerificationResult, VerificationStatus};
use verdict_core::digest::DigestKind;
use verdict_judge::config::{Budget, ProviderConfig, Sampling};
use verdict_judge::provider::{AnthropicProvider, OpenAiProvider, Provider};
use verdict_judge::secret::Secret;
use verdict_judge::{Judge, JudgeRun};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    OpenAi,
    Anthropic,
}

const KEY: &str = "sk-test-0123456789abcdef";

fn envelope(p: Proto, reply: &Value) -> Value {
    match p {
        Proto::OpenAi => openai_envelope(&reply.to_string()),
        Proto::Anthropic => anthropic_envelope(reply),
    }
}

fn judge(p: Proto, url: &str, budget: Budget, sampling: Sampling) -> Judge {
    let provider: Arc<dyn Provider> = match p {
        Proto::OpenAi => Arc::new(
            OpenAiProvider::new(url, "judge-model", Some(Secret::new(KEY.into())), Some(0.0))
                .unwrap(),
        ),
        Proto::Anthropic => Arc::new(
            AnthropicProvider::new(
                url,
                "claude-test",
                Secret::new(KEY.into()),
                "2023-06-01",
                Some(0.0),
            )
            .unwrap(),
        ),
    };
    Judge::new(class_with(openai_config(url), budget, sampling), provider).unwrap()
}

async fn run_once(
    p: Proto,
    answer: impl Fn(&Received) -> Answer + Send + Sync + 'static,
    budget: Budget,
) -> (JudgeRun, Vec<Received>) {
    let server = FakeServer::start(answer).await;
    let j = judge(p, &server.url, budget, Sampling::default());
    let run = j.run(&request()).await.unwrap();
    (run, server.received())
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
    assert!(
        run.result.criteria.is_empty() && run.result.findings.is_empty(),
        "{case}"
    );
    let detail = run.detail.as_deref().unwrap_or_default();
    assert!(
        detail.contains(detail_has),
        "{case}: detail {detail:?} lacks {detail_has:?}"
    );
    assert!(!detail.contains(KEY), "{case}: key in detail");
    // The result is still a valid contract document.
    let v = serde_json::to_value(&run.result).unwrap();
    verdict_core::contracts::decode::<VerificationResult>(DigestKind::Verification, &v).unwrap();
}

#[tokio::test]
async fn a_valid_reply_completes_with_receipts_and_runtime() {
    for p in [Proto::OpenAi, Proto::Anthropic] {
        let (run, got) = run_once(
            p,
            move |r| Answer::json(&envelope(p, &good_reply(&r.nonce()))),
            budget(),
        )
        .await;
        assert_eq!(
            run.result.status,
            VerificationStatus::Completed,
            "{p:?}: {:?}",
            run.detail
        );
        let ids: Vec<&str> = run.result.criteria.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ASKED);
        assert_eq!(run.result.criteria[0].evidence_refs, ["ev-unit"]);
        assert_eq!(run.result.criteria[0].method, "model_review");
        let ctx = run.result.context.as_ref().unwrap();
        assert!(ctx.complete);
        assert_eq!(ctx.digest, run.manifest.digest());
        assert_eq!(ctx.digest, run.context_digest);
        let v = serde_json::to_value(&run.result).unwrap();
        let (_, _) =
            verdict_core::contracts::decode::<VerificationResult>(DigestKind::Verification, &v)
                .unwrap();

        assert_eq!(run.receipts.len(), 1);
        let rc = &run.receipts[0];
        assert_eq!(
            (rc.sample, rc.attempt, rc.outcome.as_str()),
            (0, 1, "valid")
        );
        assert!(!rc.tokens_estimated);
        let runtime = run.result.verifier.runtime.as_ref().unwrap();
        match p {
            Proto::OpenAi => {
                assert_eq!((rc.tokens_in, rc.tokens_out), (Some(1200), Some(80)));
                assert_eq!(rc.snapshot.as_deref(), Some("fp_test_1"));
                assert_eq!(runtime.provider.as_str(), "openai-compatible");
                assert_eq!(runtime.snapshot.as_str(), "fp_test_1");
                let body = &got[0].body;
                assert_eq!(got[0].path, "/v1/chat/completions");
                assert_eq!(
                    got[0].header("authorization").unwrap(),
                    format!("Bearer {KEY}")
                );
                assert_eq!(body["temperature"], json!(0.0));
                assert_eq!(body["response_format"]["type"], "json_schema");
                assert_eq!(body["response_format"]["json_schema"]["strict"], true);
                assert_eq!(
                    body["response_format"]["json_schema"]["schema"],
                    verdict_judge::reply::result_schema()
                );
                assert_eq!(body["max_tokens"], 2000);
            }
            Proto::Anthropic => {
                assert_eq!((rc.tokens_in, rc.tokens_out), (Some(1300), Some(90)));
                assert_eq!(runtime.provider.as_str(), "anthropic");
                assert_eq!(runtime.snapshot.as_str(), "claude-test-20260101");
                let body = &got[0].body;
                assert_eq!(got[0].path, "/v1/messages");
                assert_eq!(got[0].header("x-api-key").unwrap(), KEY);
                assert_eq!(got[0].header("anthropic-version").unwrap(), "2023-06-01");
                assert_eq!(body["temperature"], json!(0.0));
                assert_eq!(body["tool_choice"]["type"], "tool");
                assert_eq!(
                    body["tools"][0]["input_schema"],
                    verdict_judge::reply::result_schema()
                );
            }
        }
    }
}

/// A reply builder from the request nonce.
type Mk = fn(&str) -> Value;

fn reply_cases() -> Vec<(&'static str, Mk, &'static str)> {
    vec![
        (
            "missing row",
            |n| json!({"nonce": n, "criteria": [row("tests-pass", "passed", &["ev-unit"]), row("no-regression", "passed", &["diff"])], "findings": [], "dispositions": []}),
            "no row for asked criterion \"docs-updated\"",
        ),
        (
            "extra row",
            |n| {
                let mut r = good_reply(n);
                r["criteria"].as_array_mut().unwrap().push(row(
                    "deploy-approved",
                    "passed",
                    &["diff"],
                ));
                r
            },
            "not asked",
        ),
        (
            "repeated row",
            |n| {
                let mut r = good_reply(n);
                r["criteria"]
                    .as_array_mut()
                    .unwrap()
                    .push(row("tests-pass", "failed", &[]));
                r
            },
            "more than one row",
        ),
        (
            "foreign ref",
            |n| {
                let mut r = good_reply(n);
                r["criteria"][0]["evidence_refs"] = json!(["ev-forged"]);
                r
            },
            "not a citable entry",
        ),
        (
            "objective is not citable",
            |n| {
                let mut r = good_reply(n);
                r["criteria"][0]["evidence_refs"] = json!(["objective"]);
                r
            },
            "not a citable entry",
        ),
        (
            "nonce mismatch",
            |_| good_reply("0123456789abcdef0123456789abcdef"),
            "nonce mismatch",
        ),
        (
            "unknown status",
            |n| {
                let mut r = good_reply(n);
                r["criteria"][0]["status"] = json!("mostly_passed");
                r
            },
            "result schema",
        ),
        (
            "extra field",
            |n| {
                let mut r = good_reply(n);
                r["decision"] = json!("pass");
                r
            },
            "result schema",
        ),
        (
            "finding on an unasked criterion",
            |n| {
                let mut r = good_reply(n);
                r["findings"] = json!([{"criterion": "security", "type": "x", "severity": "blocker", "scope": "change",
                "location": null, "evidence_refs": [], "remediation": null, "confidence": null}]);
                r
            },
            "not asked",
        ),
        (
            "disposition of an unknown finding",
            |n| {
                let mut r = good_reply(n);
                r["dispositions"] = json!([{"finding": "f-9", "version": 1, "disposition": "resolved", "evidence_refs": ["diff"], "reason": null}]);
                r
            },
            "not a listed prior blocker",
        ),
    ]
}

#[tokio::test]
async fn every_invalid_reply_is_unavailable_invalid_output() {
    for p in [Proto::OpenAi, Proto::Anthropic] {
        for (case, mk, detail) in reply_cases() {
            let (run, _) = run_once(
                p,
                move |r| Answer::json(&envelope(p, &mk(&r.nonce()))),
                budget(),
            )
            .await;
            assert_unavailable(
                &run,
                UnavailableReason::InvalidOutput,
                detail,
                &format!("{p:?} {case}"),
            );
            assert_eq!(
                run.receipts.len(),
                1,
                "{case}: invalid output is not retried"
            );
            assert_eq!(run.receipts[0].outcome, "invalid_output");
        }
    }
}

#[tokio::test]
async fn invalid_json_refusal_truncation_and_missing_results_are_invalid_output() {
    // OpenAI-compatible: the content string itself.
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "invalid json",
            openai_envelope("{\"nonce\": \"x\", "),
            "not strict JSON",
            "invalid_output",
        ),
        (
            "duplicate key",
            openai_envelope("{\"nonce\": \"a\", \"nonce\": \"b\"}"),
            "duplicate object key",
            "invalid_output",
        ),
        (
            "prose around json",
            openai_envelope("Sure! {\"nonce\": 1}"),
            "not strict JSON",
            "invalid_output",
        ),
        (
            "refusal",
            json!({"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": "I can't help with that"}, "finish_reason": "stop"}]}),
            "refused",
            "refused",
        ),
        (
            "truncated",
            json!({"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"nonce\": \"ab"}, "finish_reason": "length"}]}),
            "cut off",
            "truncated",
        ),
        (
            "content filter",
            json!({"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "content_filter"}]}),
            "refused",
            "refused",
        ),
        (
            "no choices",
            json!({"model": "m", "choices": []}),
            "no choices",
            "no_result",
        ),
    ];
    for (case, body, detail, outcome) in cases {
        let (run, _) = run_once(Proto::OpenAi, move |_| Answer::json(&body), budget()).await;
        assert_unavailable(&run, UnavailableReason::InvalidOutput, detail, case);
        assert_eq!(run.receipts[0].outcome, outcome, "{case}");
    }
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "refusal",
            json!({"model": "c", "content": [{"type": "text", "text": "No."}], "stop_reason": "refusal"}),
            "refused",
        ),
        (
            "truncated",
            json!({"model": "c", "content": [{"type": "tool_use", "name": verdict_judge::provider::ANTHROPIC_TOOL, "input": {}}], "stop_reason": "max_tokens"}),
            "cut off",
        ),
        (
            "no tool call",
            json!({"model": "c", "content": [{"type": "text", "text": "{\"nonce\": \"x\"}"}], "stop_reason": "end_turn"}),
            "no submit_verification_result tool call",
        ),
        (
            "tool input not an object",
            anthropic_envelope(&json!("all passed")),
            "result schema",
        ),
    ];
    for (case, body, detail) in cases {
        let (run, _) = run_once(Proto::Anthropic, move |_| Answer::json(&body), budget()).await;
        assert_unavailable(&run, UnavailableReason::InvalidOutput, detail, case);
    }
}

#[tokio::test]
async fn transport_and_protocol_failures_are_provider_errors() {
    for p in [Proto::OpenAi, Proto::Anthropic] {
        // Not JSON at all: the envelope breaks the protocol.
        let (run, _) = run_once(p, |_| Answer::raw(200, "<html>gateway</html>"), budget()).await;
        assert_unavailable(
            &run,
            UnavailableReason::ProviderError,
            "not strict JSON",
            "html body",
        );
        // A client error is not retried.
        let (run, got) = run_once(
            p,
            |_| Answer::raw(400, r#"{"error": "bad model"}"#),
            budget(),
        )
        .await;
        assert_unavailable(
            &run,
            UnavailableReason::ProviderError,
            "http status 400",
            "400",
        );
        assert_eq!(got.len(), 1);
        // A server error is retried up to max_attempts, then given up.
        let (run, got) = run_once(p, |_| Answer::raw(503, "overloaded"), budget()).await;
        assert_unavailable(
            &run,
            UnavailableReason::ProviderError,
            "gave up after 3 attempts",
            "503",
        );
        assert_eq!(got.len(), 3);
        let outcomes: Vec<&str> = run.receipts.iter().map(|r| r.outcome.as_str()).collect();
        assert_eq!(outcomes, ["http_503"; 3]);
    }
    // Nothing listening: a transport error.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let j = judge(
        Proto::OpenAi,
        &format!("http://127.0.0.1:{port}/v1"),
        budget(),
        Sampling::default(),
    );
    let run = j.run(&request()).await.unwrap();
    assert_unavailable(
        &run,
        UnavailableReason::ProviderError,
        "transport error",
        "refused",
    );
    assert_eq!(run.receipts[0].outcome, "transport_error");
}

#[tokio::test]
async fn a_slow_server_hits_the_timeout() {
    for p in [Proto::OpenAi, Proto::Anthropic] {
        let b = Budget {
            timeout_s: 0.3,
            ..budget()
        };
        let (run, _) = run_once(
            p,
            move |r| {
                Answer::json(&envelope(p, &good_reply(&r.nonce()))).delayed(Duration::from_secs(30))
            },
            b,
        )
        .await;
        assert_unavailable(&run, UnavailableReason::Timeout, "timed out", "slow");
        assert_eq!(run.receipts.len(), 1);
        assert_eq!(run.receipts[0].outcome, "timeout");
    }
}

#[tokio::test]
async fn rate_limited_then_ok_succeeds_within_budget() {
    for p in [Proto::OpenAi, Proto::Anthropic] {
        let (run, got) = run_once(
            p,
            move |r| {
                if r.index == 0 {
                    Answer::raw(429, r#"{"error": "slow down"}"#).header("retry-after", "0")
                } else {
                    Answer::json(&envelope(p, &good_reply(&r.nonce())))
                }
            },
            budget(),
        )
        .await;
        assert_eq!(
            run.result.status,
            VerificationStatus::Completed,
            "{p:?} {:?}",
            run.detail
        );
        assert_eq!(got.len(), 2);
        let outcomes: Vec<(u32, &str)> = run
            .receipts
            .iter()
            .map(|r| (r.attempt, r.outcome.as_str()))
            .collect();
        assert_eq!(outcomes, [(1, "http_429"), (2, "valid")]);
        // A retry re-sends the same rendering: same nonce.
        assert_eq!(got[0].nonce(), got[1].nonce());
    }
}

#[tokio::test]
async fn budget_exhaustion_stops_retries() {
    // The provider asks for a wait longer than the time left: no wait, no retry.
    let b = Budget {
        timeout_s: 2.0,
        ..budget()
    };
    let (run, got) = run_once(
        Proto::OpenAi,
        |_| Answer::raw(429, "{}").header("retry-after", "30"),
        b,
    )
    .await;
    assert_unavailable(
        &run,
        UnavailableReason::BudgetExhausted,
        "would pass the run's time budget",
        "retry-after",
    );
    assert_eq!(got.len(), 1);

    // A token cap: the second sample would pass it, so it is never sent.
    let server =
        FakeServer::start(|r| Answer::json(&openai_envelope(&good_reply(&r.nonce()).to_string())))
            .await;
    let probe = judge(Proto::OpenAi, &server.url, budget(), Sampling::default());
    let plan = verdict_judge::judge::plan_request(probe.class(), &request()).unwrap();
    let prompt_tokens = plan.manifest.construction.estimated_tokens;
    // After one call 1280 tokens are spent; one more prompt would pass the cap by one.
    let b = Budget {
        max_total_tokens: Some(1280 + prompt_tokens - 1),
        ..budget()
    };
    let j = judge(Proto::OpenAi, &server.url, b, Sampling { n: 2, k: None });
    let run = j.run(&request()).await.unwrap();
    assert_unavailable(
        &run,
        UnavailableReason::BudgetExhausted,
        "token budget",
        "tokens",
    );
    assert_eq!(
        server.received().len(),
        1,
        "the second sample is never sent"
    );
    assert_eq!(run.receipts.len(), 1);
}

#[tokio::test]
async fn cost_budget_uses_prices_and_receipts_carry_costs() {
    // Usage above the estimate of what was sent and written, so the reported counts are the
    // ones charged.
    let server = FakeServer::start(|r| {
        let mut env = openai_envelope(&good_reply(&r.nonce()).to_string());
        env["usage"] = json!({"prompt_tokens": 12_000, "completion_tokens": 800});
        Answer::json(&env)
    })
    .await;
    let price = verdict_judge::config::Price {
        input_per_mtok: 100.0,
        output_per_mtok: 1000.0,
    };
    let cfg = ProviderConfig::Openai {
        base_url: server.url.clone(),
        model: "judge-model".into(),
        api_key_env: None,
        temperature: Some(0.0),
        price: Some(price),
    };
    let provider =
        Arc::new(OpenAiProvider::new(&server.url, "judge-model", None, Some(0.0)).unwrap());
    let class = class_with(cfg, budget(), Sampling { n: 2, k: None });
    let prompt_tokens = verdict_judge::judge::plan_request(&class, &request())
        .unwrap()
        .manifest
        .construction
        .estimated_tokens;
    // A call reports 12,000 in and 800 out: 1.2 + 0.8 = 2.0. Before each call the prompt's own
    // input cost is checked against what is left: the second call no longer fits.
    assert!(prompt_tokens < 12_000, "{prompt_tokens}");
    #[allow(clippy::cast_precision_loss)]
    let prompt_cost = prompt_tokens as f64 * 100.0 / 1e6;
    let mut class = class;
    class.config.budget.max_cost = Some(2.0 + prompt_cost - 1e-9);
    let j = Judge::new(class, provider).unwrap();
    let run = j.run(&request()).await.unwrap();
    assert_unavailable(
        &run,
        UnavailableReason::BudgetExhausted,
        "cost budget",
        "cost",
    );
    assert_eq!(run.receipts.len(), 1);
    let cost = run.receipts[0].cost_estimate.unwrap();
    assert!((cost - 2.0).abs() < 1e-9, "{cost}");
}

#[tokio::test]
async fn cancellation_ends_unavailable_cancelled_with_receipts_kept() {
    let server = FakeServer::start(|r| {
        if r.index == 0 {
            Answer::raw(503, "busy")
        } else {
            Answer::json(&openai_envelope(&good_reply(&r.nonce()).to_string()))
                .delayed(Duration::from_secs(30))
        }
    })
    .await;
    let j = judge(Proto::OpenAi, &server.url, budget(), Sampling::default());
    let run = j
        .run_until(&request(), tokio::time::sleep(Duration::from_millis(300)))
        .await
        .unwrap();
    assert_unavailable(&run, UnavailableReason::Cancelled, "cancelled", "cancel");
    assert_eq!(
        run.receipts.len(),
        1,
        "the finished first attempt is on record"
    );
}

#[tokio::test]
async fn a_request_for_another_class_is_refused() {
    let j = judge(
        Proto::OpenAi,
        "http://127.0.0.1:9/v1",
        budget(),
        Sampling::default(),
    );
    let mut req = request();
    req.verifier.class = "security".parse().unwrap();
    let err = j.run(&req).await.unwrap_err();
    assert!(err.to_string().contains("\"security\""), "{err}");
}

#[tokio::test]
async fn a_key_goes_over_plain_http_only_to_the_loopback() {
    // Another host over plain http: a provider that sends a key is refused when it is built,
    // before anything is sent; one without a key has nothing to expose.
    for url in ["http://192.0.2.7:8000/v1", "HTTP://models.example/v1"] {
        let refused = [
            OpenAiProvider::new(url, "m", Some(Secret::new(KEY.into())), None).map(|_| ()),
            AnthropicProvider::new(url, "m", Secret::new(KEY.into()), "2023-06-01", None)
                .map(|_| ()),
        ];
        for err in refused {
            let err = err.unwrap_err();
            assert!(
                err.contains(&format!("{url:?}")) && err.contains("unencrypted"),
                "{url}: {err}"
            );
        }
        assert!(OpenAiProvider::new(url, "m", None, None).is_ok(), "{url}");
    }
    // The loopback over plain http (the fake server's `http://127.0.0.1:PORT`) still gets the
    // key and answers.
    for p in [Proto::OpenAi, Proto::Anthropic] {
        let (run, got) = run_once(
            p,
            move |r| Answer::json(&envelope(p, &good_reply(&r.nonce()))),
            budget(),
        )
        .await;
        assert_eq!(
            run.result.status,
            VerificationStatus::Completed,
            "{p:?}: {:?}",
            run.detail
        );
        let sent = got[0]
            .header("authorization")
            .or_else(|| got[0].header("x-api-key"))
            .unwrap();
        assert!(sent.contains(KEY), "{p:?}");
    }
}
