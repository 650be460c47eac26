//! Shared test support: a request, fake provider servers on loopback, reply builders.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use verdict_core::contracts::{CheckEvidence, Criteria, Finding};
use verdict_core::digest::{self, Digest};
use verdict_judge::config::{
    Budget, ClassConfig, ProviderConfig, ResolvedClass, Sampling, TemplateSource,
};
use verdict_judge::request::{
    EvidenceInput, JudgeRequest, ObjectiveInput, ResourceInput, VerifierIdentity,
};

pub const SUBJECT: &str = "sha256:0ac282182c0ff7c3fa537b686f41beda4e5b04340ac0f1f9fd577a4c9b37f0ea";
pub const DIFF: &str = "--- a/pay.rs\n+++ b/pay.rs\n@@ -1,3 +1,5 @@\n fn pay() {\n-    charge();\n+    if charge().is_err() {\n+        charge_again();\n+    }\n }\n";
pub const LOG: &str =
    "running 12 tests\ntest pay::retry ... ok\ntest result: ok. 12 passed; 0 failed\n";
pub const ASKED: [&str; 3] = ["tests-pass", "no-regression", "docs-updated"];

pub fn subject() -> Digest {
    SUBJECT.parse().unwrap()
}

pub fn criteria() -> Criteria {
    serde_json::from_value(json!({
        "revision": "crit-r4",
        "items": [
            {"id": "tests-pass", "text": "All unit tests pass", "required": true},
            {"id": "no-regression", "text": "Existing callers behave as before", "required": true, "role": "safety"},
            {"id": "docs-updated", "text": "Docs mention the retry", "required": false}
        ]
    }))
    .unwrap()
}

pub fn evidence_doc(id: &str) -> CheckEvidence {
    serde_json::from_value(json!({
        "id": id, "kind": "check", "check": "unit-tests", "subject_digest": SUBJECT,
        "definition_digest": "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86",
        "produced_by": {"principal": "ci-runner", "role": "runner"}, "outcome": "pass", "hard": true,
        "content_digest": "sha256:ae53a0c9ed06211ec4f14582592577707de05f3c953bb7a0393fac4b2a475846",
        "observed_at": "2026-11-30T11:50:00Z", "freshness": {"kind": "content"}
    }))
    .unwrap()
}

pub fn prior_finding(id: &str, version: u64) -> Finding {
    serde_json::from_value(json!({
        "id": id, "version": version, "criterion": "no-regression", "type": "behaviour_change",
        "severity": "blocker", "scope": "change",
        "subject_digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
        "location": {"resource": "diff", "path": "pay.rs", "line": 3},
        "evidence_refs": ["diff"], "method": "model_review", "remediation": "keep the old signature"
    }))
    .unwrap()
}

pub fn resource(name: &str, kind: &str, content: &[u8], required: bool) -> ResourceInput {
    ResourceInput {
        name: name.parse().unwrap(),
        kind: kind.parse().unwrap(),
        digest: digest::raw(content),
        content: content.to_vec(),
        required,
    }
}

/// A request with a diff, one piece of check evidence with its log, and no prior findings.
pub fn request() -> JudgeRequest {
    JudgeRequest {
        result_id: "vr-1".parse().unwrap(),
        verifier: VerifierIdentity {
            principal: "reviewer-1".parse().unwrap(),
            class: "reviewer".parse().unwrap(),
            run: "vrun-1".parse().unwrap(),
        },
        subject_digest: subject(),
        generation: 3,
        objective: ObjectiveInput {
            revision: "obj-r4".parse().unwrap(),
            text: "Retry a failed charge once".into(),
            digest: None,
        },
        criteria: criteria(),
        ask: None,
        resources: vec![resource("diff", "git_diff", DIFF.as_bytes(), true)],
        evidence: vec![EvidenceInput {
            document: evidence_doc("ev-unit"),
            output: Some(LOG.as_bytes().to_vec()),
        }],
        prior_findings: vec![],
        evidence_refs_waived: vec![],
    }
}

pub fn budget() -> Budget {
    Budget {
        context_tokens: 32_000,
        max_output_tokens: 2_000,
        timeout_s: 10.0,
        max_attempts: 3,
        backoff_ms: 10,
        max_total_tokens: None,
        max_cost: None,
    }
}

pub fn class_with(provider: ProviderConfig, budget: Budget, sampling: Sampling) -> ResolvedClass {
    ResolvedClass {
        name: "reviewer".parse().unwrap(),
        config: ClassConfig {
            provider,
            budget,
            template: TemplateSource::Builtin("reviewer".into()),
            sampling,
            cache: true,
        },
        template: verdict_judge::template::builtin("reviewer")
            .unwrap()
            .to_owned(),
    }
}

pub fn openai_config(url: &str) -> ProviderConfig {
    ProviderConfig::Openai {
        base_url: url.to_owned(),
        model: "judge-model".into(),
        api_key_env: None,
        temperature: Some(0.0),
        price: None,
    }
}

/// The nonce of a rendered request, read back from the system message.
pub fn nonce_of(text: &str) -> String {
    let at = text
        .find("Rules for this request (nonce ")
        .expect("nonce line")
        + "Rules for this request (nonce ".len();
    text[at..at + 32].to_owned()
}

pub fn row(id: &str, status: &str, refs: &[&str]) -> Value {
    json!({"id": id, "status": status, "evidence_refs": refs, "rationale": "looked at it"})
}

/// A valid reply for the standard request.
pub fn good_reply(nonce: &str) -> Value {
    json!({
        "nonce": nonce,
        "criteria": [
            row("tests-pass", "passed", &["ev-unit"]),
            row("no-regression", "passed", &["diff"]),
            row("docs-updated", "not_tested", &[]),
        ],
        "findings": [],
        "dispositions": []
    })
}

// ---- fake provider servers ----

/// One request the fake server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
    pub index: usize,
}

impl Received {
    /// The system and user text, whichever protocol.
    pub fn prompt(&self) -> (String, String) {
        if let Some(msgs) = self.body.get("messages").and_then(Value::as_array) {
            if let Some(sys) = self.body.get("system").and_then(Value::as_str) {
                let user = msgs[0]["content"].as_str().unwrap_or_default().to_owned();
                return (sys.to_owned(), user);
            }
            let sys = msgs[0]["content"].as_str().unwrap_or_default().to_owned();
            let user = msgs[1]["content"].as_str().unwrap_or_default().to_owned();
            return (sys, user);
        }
        (String::new(), String::new())
    }

    pub fn nonce(&self) -> String {
        nonce_of(&self.prompt().0)
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

/// What the fake server answers.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub delay: Duration,
    pub headers: Vec<(String, String)>,
}

impl Answer {
    pub fn json(v: &Value) -> Self {
        Self::raw(200, &v.to_string())
    }
    pub fn raw(status: u16, body: &str) -> Self {
        Self {
            status,
            body: body.to_owned(),
            delay: Duration::ZERO,
            headers: vec![],
        }
    }
    pub fn delayed(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }
}

type Handler = Arc<dyn Fn(&Received) -> Answer + Send + Sync>;

#[derive(Clone)]
struct ServerState {
    handler: Handler,
    log: Arc<Mutex<Vec<Received>>>,
}

async fn handle(
    State(st): State<ServerState>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let rec = {
        let mut log = st.log.lock().unwrap();
        let r = Received {
            path: uri.path().to_owned(),
            headers,
            body,
            index: log.len(),
        };
        log.push(r.clone());
        r
    };
    let a = (st.handler)(&rec);
    if !a.delay.is_zero() {
        tokio::time::sleep(a.delay).await;
    }
    let mut resp = (StatusCode::from_u16(a.status).unwrap(), a.body).into_response();
    resp.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    for (k, v) in a.headers {
        resp.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    resp
}

/// A fake provider server on a loopback port.
pub struct FakeServer {
    pub url: String,
    pub log: Arc<Mutex<Vec<Received>>>,
}

impl FakeServer {
    pub async fn start(handler: impl Fn(&Received) -> Answer + Send + Sync + 'static) -> Self {
        let log = Arc::new(Mutex::new(Vec::new()));
        let st = ServerState {
            handler: Arc::new(handler),
            log: log.clone(),
        };
        let app = Router::new().fallback(handle).with_state(st);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{addr}/v1"),
            log,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.log.lock().unwrap().clone()
    }
}

/// An OpenAI chat-completions envelope around reply text.
pub fn openai_envelope(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "judge-model-2026-01",
        "system_fingerprint": "fp_test_1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": null}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 80}
    })
}

/// An Anthropic messages envelope around a tool input.
pub fn anthropic_envelope(input: &Value) -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-20260101",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": verdict_judge::provider::ANTHROPIC_TOOL, "input": input}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1300, "output_tokens": 90}
    })
}
