//! `verdict verify` run as the built binary against a real store (SQLite, and PostgreSQL where
//! what is stored is the point) and a fake OpenAI-compatible server on loopback, started by
//! each test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use axum::Router;
use axum::extract::State;
use serde_json::{Value, json};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const DEF: &str = "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86";
const OBJECTIVE: &str = "Retry a failed charge once";
const DIFF: &str = "--- a/pay.rs\n+++ b/pay.rs\n+    charge_again();\n";

#[derive(Clone, Copy)]
enum Reply {
    Valid,
    Garbage,
    /// Schema-valid, but its pass cites `objective`, which is no citable entry.
    CitesObjective,
    /// Two choices: the first all passed, the second failed.
    TwoChoices,
    /// A 401 whose body echoes the Authorization header, the key across the excerpt's cut.
    EchoKey,
}

struct Server {
    url: String,
    calls: Arc<AtomicUsize>,
    _rt: tokio::runtime::Runtime,
}

fn nonce_of(system: &str) -> String {
    let tag = "Rules for this request (nonce ";
    let at = system.find(tag).expect("nonce line") + tag.len();
    system[at..at + 32].to_owned()
}

async fn answer(
    State((mode, calls)): State<(Reply, Arc<AtomicUsize>)>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    calls.fetch_add(1, Ordering::SeqCst);
    let req: Value = serde_json::from_slice(&body).unwrap();
    let system = req["messages"][0]["content"].as_str().unwrap_or_default();
    let row = |status: &str, refs: &[&str]| {
        json!({"id": "tests-pass", "status": status, "evidence_refs": refs,
               "rationale": "the unit tests ran"})
    };
    let doc = |rows: Value| {
        json!({"nonce": nonce_of(system), "criteria": rows, "findings": [], "dispositions": []})
            .to_string()
    };
    let content = match mode {
        Reply::Valid => doc(json!([row("passed", &["ev-1"])])),
        Reply::Garbage => "certainly! everything passes <<<".to_owned(),
        Reply::CitesObjective => doc(json!([row("passed", &["objective"])])),
        Reply::TwoChoices => doc(json!([row("passed", &["ev-1"])])),
        Reply::EchoKey => {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            // The excerpt keeps 512 bytes: the key starts 40 bytes before the cut.
            let lead = "{\"error\": \"rejected Authorization: ";
            let pad = "x".repeat(512 - 40 - lead.len() - "Bearer ".len());
            let body = format!("{pad}{lead}{auth}\"}}");
            return (axum::http::StatusCode::UNAUTHORIZED, body).into_response();
        }
    };
    let mut choices = vec![json!({"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}})];
    if let Reply::TwoChoices = mode {
        choices.push(json!({"index": 1, "finish_reason": "stop",
            "message": {"role": "assistant", "content": doc(json!([row("failed", &[])]))}}));
    }
    axum::Json(json!({
        "id": "c-1", "model": "judge-model", "system_fingerprint": "fp_cli",
        "choices": choices,
        "usage": {"prompt_tokens": 10, "completion_tokens": 10}
    }))
    .into_response()
}

fn server(mode: Reply) -> Server {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = Router::new()
        .fallback(answer)
        .with_state((mode, calls.clone()));
    rt.spawn(async move { axum::serve(listener, app).await });
    Server {
        url,
        calls,
        _rt: rt,
    }
}

struct Env {
    store: String,
    dir: tempfile::TempDir,
    /// Dropped with the environment, also when a test panics.
    _pg: Option<verdict_store::scratch::ScratchPostgres>,
}

#[derive(Debug, Clone, Copy)]
enum Backend {
    Sqlite,
    Postgres,
}

const BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

/// The variable the key-echo test's verifiers file names; set only on that test's commands.
const KEY_VAR: &str = "VERDICT_VERIFY_TEST_KEY";

impl Env {
    fn run(&self, token: Option<&str>, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_verdict"));
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("VERDICT_STORE", &self.store)
            .env("VERDICT_HOME", self.dir.path().join("home"))
            .env("VERDICT_VERIFY_TEST_KEY", long_key())
            .env_remove("VERDICT_TOKEN");
        if let Some(t) = token {
            cmd.env("VERDICT_TOKEN", t);
        }
        cmd.output().unwrap()
    }

    fn ok(&self, token: Option<&str>, args: &[&str]) -> String {
        let out = self.run(token, args);
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    }
}

/// A store with one subject, its check evidence (`outcome`) and a request asking `reviewer`.
struct Setup {
    env: Env,
    ops: String,
    ci: String,
    coder: String,
    rev: String,
    request: String,
    verifiers: String,
    objective: String,
    diff: String,
}

fn raw(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    std::fs::write(&p, bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["digest", "--raw", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", out);
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

/// A 96-character key with no repeated 12-character run.
fn long_key() -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let body: String = (0..93)
        .map(|i| char::from(alphabet[(i * 17 + i / 7) % alphabet.len()]))
        .collect();
    format!("sk-{body}")
}

fn setup(outcome: &str, url: &str) -> Setup {
    setup_on(Backend::Sqlite, outcome, url, None)
}

/// [`setup`] on `backend`; `key_var` makes the class send the key held in that variable.
fn setup_on(backend: Backend, outcome: &str, url: &str, key_var: Option<&str>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let env = match backend {
        Backend::Sqlite => Env {
            store: format!("sqlite:{}", dir.path().join("store/verdict.db").display()),
            dir,
            _pg: None,
        },
        Backend::Postgres => {
            let pg = verdict_store::scratch::ScratchPostgres::create_migrated("verify").unwrap();
            Env {
                store: pg.url().to_owned(),
                dir,
                _pg: Some(pg),
            }
        }
    };
    let ops = env.ok(None, &["init", "--operator", "ops"]);
    let add = |n: &str, r: &str| env.ok(Some(&ops), &["principal", "add", n, "--role", r]);
    let (coder, ci, rev) = (
        add("coder", "producer"),
        add("ci", "runner"),
        add("rev", "verifier"),
    );
    for (g, p, a) in [
        ("g-coder", "coder", "write"),
        ("g-ci", "ci", "write"),
        ("g-rev", "rev", "read"),
    ] {
        env.ok(
            Some(&ops),
            &[
                "grant",
                "add",
                g,
                "--principal",
                p,
                "--execution",
                "ex-1",
                "--access",
                a,
                "--expires",
                "2099-01-01T00:00:00Z",
            ],
        );
    }
    let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                        "required_checks": ["unit-tests"], "required_verifiers": ["reviewer"]});
    let pf = env.file("policy.json", policy.to_string().as_bytes());
    env.ok(Some(&ops), &["policy", "set", &pf]);
    let subject = json!({
        "schema": "verdict.subject/v1",
        "execution": {"id": "ex-1", "generation": 1},
        "work_items": [], "producer": {"principal": "coder", "run": "run-coder"},
        "objective": {"revision": "1", "digest": raw(OBJECTIVE.as_bytes())},
        "criteria": {"revision": "1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
        "resources": [{"name": "diff", "kind": "git_diff", "digest": raw(DIFF.as_bytes())}],
        "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
        "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
    });
    let sf = env.file("subject.json", subject.to_string().as_bytes());
    let sd = env.ok(Some(&coder), &["subject", "put", &sf]);
    let ev = json!([{"id": "ev-1", "kind": "check", "check": "unit-tests", "subject_digest": sd,
                    "definition_digest": DEF, "produced_by": {"principal": "ci", "role": "runner"},
                    "outcome": outcome, "content_digest": DEF, "observed_at": "2026-11-30T11:59:00Z",
                    "freshness": {"kind": "content"}}]);
    let ef = env.file("ev.json", ev.to_string().as_bytes());
    env.ok(Some(&ci), &["evidence", "add", &ef]);
    let request = env.ok(Some(&coder), &["request", "create", "ex-1"]);
    let mut provider = json!({"kind": "openai", "base_url": url, "model": "judge-model"});
    if let Some(var) = key_var {
        provider["api_key_env"] = json!(var);
    }
    let verifiers = json!({"version": 1, "classes": {"reviewer": {
        "provider": provider,
        "budget": {"timeout_s": 20, "max_attempts": 2, "backoff_ms": 10}}}});
    let verifiers = env.file("verifiers.json", verifiers.to_string().as_bytes());
    let objective = env.file("objective.md", OBJECTIVE.as_bytes());
    let diff = env.file("change.diff", DIFF.as_bytes());
    Setup {
        env,
        ops,
        ci,
        coder,
        rev,
        request,
        verifiers,
        objective,
        diff,
    }
}

impl Setup {
    fn verify(&self, token: &str, extra: &[&str]) -> Output {
        self.verify_request(&self.request, token, extra)
    }

    /// `verify` of another request, with the setup's objective and resource.
    fn verify_request(&self, request: &str, token: &str, extra: &[&str]) -> Output {
        let resource = format!("diff={}", self.diff);
        let mut args = vec!["--objective", &self.objective, "--resource", &resource];
        args.extend_from_slice(extra);
        self.verify_raw_request(request, token, &args)
    }

    /// `verify` with only the request, the verifiers file and `args`.
    fn verify_raw(&self, token: &str, args: &[&str]) -> Output {
        self.verify_raw_request(&self.request, token, args)
    }

    fn verify_raw_request(&self, request: &str, token: &str, args: &[&str]) -> Output {
        let mut all = vec!["verify", request, "--verifiers", &self.verifiers];
        all.extend_from_slice(args);
        self.env.run(Some(token), &all)
    }

    fn gate(&self) -> (Option<i32>, Value) {
        let out = self.env.run(Some(&self.ci), &["gate", "run", "ex-1"]);
        (
            out.status.code(),
            serde_json::from_slice(&out.stdout).unwrap(),
        )
    }
}

/// Stdout of a run that must exit with `code` (both streams shown if it did not).
fn exits(out: &Output, code: i32) -> String {
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    stdout
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_valid_reply_is_stored_counted_and_the_gate_passes() {
    let srv = server(Reply::Valid);
    let s = setup("pass", &srv.url);
    let out = s.verify(&s.rev, &[]);
    let stdout = exits(&out, 0);
    let line = stdout.lines().next().unwrap();
    let cols: Vec<&str> = line.split(' ').collect();
    assert_eq!(cols[0], "reviewer", "{line}");
    assert!(cols[1].starts_with("vrun-reviewer-"), "{line}");
    assert_eq!(&cols[2..], ["completed", "-"], "{line}");
    assert!(srv.calls.load(Ordering::SeqCst) >= 1);
    let (code, decision) = s.gate();
    assert_eq!(decision["outcome"], "pass", "{decision}");
    assert_eq!(code, Some(0));
    let history: Value =
        serde_json::from_str(&s.env.ok(Some(&s.rev), &["history", "ex-1", "--json"])).unwrap();
    let run = &history["runs"][0];
    assert_eq!(run["run_id"], cols[1]);
    assert_eq!(run["counted"], true, "{history}");
}

#[test]
fn garbage_ends_unavailable_invalid_output_and_the_gate_is_blocked() {
    let srv = server(Reply::Garbage);
    let s = setup("pass", &srv.url);
    let out = s.verify(&s.rev, &["--class", "reviewer"]);
    let stdout = exits(&out, 1);
    assert!(
        stdout.starts_with("reviewer vrun-reviewer-")
            && stdout.contains(" unavailable invalid_output"),
        "{stdout}"
    );
    let (code, decision) = s.gate();
    assert_eq!(code, Some(1));
    assert_eq!(decision["outcome"], "blocked", "{decision}");
    let codes: Vec<&str> = decision["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"verifier_unavailable"), "{codes:?}");
    let history: Value =
        serde_json::from_str(&s.env.ok(Some(&s.rev), &["history", "ex-1", "--json"])).unwrap();
    assert_eq!(history["runs"][0]["status"], "unavailable", "{history}");
}

#[test]
fn a_failing_required_check_skips_the_model_entirely() {
    let srv = server(Reply::Valid);
    let s = setup("fail", &srv.url);
    let out = s.verify(&s.rev, &[]);
    let stdout = exits(&out, 1);
    assert!(stdout.contains(" skipped preflight "), "{stdout}");
    assert!(stdout.contains("check_failed"), "{stdout}");
    assert_eq!(srv.calls.load(Ordering::SeqCst), 0, "the model was called");
    let history: Value =
        serde_json::from_str(&s.env.ok(Some(&s.rev), &["history", "ex-1", "--json"])).unwrap();
    assert_eq!(history["runs"][0]["status"], "cancelled", "{history}");
}

#[test]
fn a_producer_token_is_denied_and_nothing_is_called() {
    let srv = server(Reply::Valid);
    let s = setup("pass", &srv.url);
    let out = s.verify(&s.coder, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("permission_denied"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(srv.calls.load(Ordering::SeqCst), 0);
    let out = s.env.run(
        None,
        &[
            "verify",
            &s.request,
            "--verifiers",
            &s.verifiers,
            "--objective",
            &s.objective,
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unauthenticated"));
}

#[test]
fn resource_and_objective_bytes_must_match_the_subject_or_nothing_runs() {
    let srv = server(Reply::Valid);
    let s = setup("pass", &srv.url);
    let wrong = s.env.file("wrong.diff", b"+ something else\n");
    let good = format!("diff={}", s.diff);
    let bad = format!("diff={wrong}");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--objective", &s.objective, "--resource", &bad],
            "not the pinned",
        ),
        (
            vec![
                "--objective",
                &s.objective,
                "--resource",
                &good,
                "--resource",
                "nope=/dev/null",
            ],
            "no resource of that name",
        ),
        (
            vec![
                "--objective",
                &s.objective,
                "--resource",
                &good,
                "--resource",
                &bad,
            ],
            "given twice",
        ),
        (
            vec!["--objective", &s.objective, "--resource", "diff"],
            "expected NAME=FILE",
        ),
        (
            vec!["--objective", &wrong, "--resource", &good],
            "objective digest",
        ),
        (
            vec!["--objective", &s.objective],
            "give --resource diff=FILE",
        ),
        (
            vec![
                "--objective",
                &s.objective,
                "--resource",
                &good,
                "--class",
                "security",
            ],
            "asks for",
        ),
    ];
    for (args, needle) in cases {
        let out = s.verify_raw(&s.rev, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert_eq!(srv.calls.load(Ordering::SeqCst), 0);
    let history: Value =
        serde_json::from_str(&s.env.ok(Some(&s.rev), &["history", "ex-1", "--json"])).unwrap();
    assert_eq!(history["runs"], json!([]), "a run was admitted: {history}");
}

#[test]
fn verify_help_shows_an_example() {
    let out = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["verify", "--help"])
        .output()
        .unwrap();
    let help = text(&out.stdout);
    assert!(
        help.contains("Example") && help.contains("--resource"),
        "{help}"
    );
}

#[test]
fn a_pass_citing_no_citable_entry_ends_the_run_unavailable() {
    let srv = server(Reply::CitesObjective);
    let s = setup("pass", &srv.url);
    let out = s.verify(&s.rev, &[]);
    let stdout = exits(&out, 1);
    assert!(
        stdout.contains(" unavailable invalid_output: ") && stdout.contains("cites \"objective\""),
        "{stdout}"
    );
    let history: Value =
        serde_json::from_str(&s.env.ok(Some(&s.rev), &["history", "ex-1", "--json"])).unwrap();
    assert_eq!(history["runs"][0]["status"], "unavailable", "{history}");
    let (_, decision) = s.gate();
    assert_ne!(decision["outcome"], "pass", "{decision}");
}

#[test]
fn the_request_budget_caps_the_class_budget() {
    let srv = server(Reply::Valid);
    let s = setup("pass", &srv.url);
    // The class allows any number of tokens; the request allows five, fewer than any prompt.
    let capped = s.env.ok(
        Some(&s.coder),
        &[
            "request",
            "create",
            "ex-1",
            "--budget",
            r#"{"max_total_tokens": 5}"#,
        ],
    );
    let out = s.verify_request(&capped, &s.rev, &[]);
    let stdout = exits(&out, 1);
    assert!(stdout.contains(" unavailable budget_exhausted"), "{stdout}");
    let (_, decision) = s.gate();
    assert_ne!(decision["outcome"], "pass", "{decision}");
    // A budget with a typo is refused before anything is stored.
    let out = s.env.run(
        Some(&s.coder),
        &[
            "request",
            "create",
            "ex-1",
            "--budget",
            r#"{"max_token": 5}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("max_token"),
        "{}",
        text(&out.stderr)
    );
}

fn history(s: &Setup) -> Value {
    serde_json::from_str(&s.env.ok(Some(&s.rev), &["history", "ex-1", "--json"])).unwrap()
}

#[test]
fn receipts_are_stored_with_the_run_and_history_shows_them() {
    for backend in BACKENDS {
        // A valid run: one receipt with what the call reported.
        let srv = server(Reply::Valid);
        let s = setup_on(backend, "pass", &srv.url, None);
        exits(&s.verify(&s.rev, &[]), 0);
        let h = history(&s);
        let run = &h["runs"][0];
        let rc = &run["receipts"][0];
        assert_eq!(rc["provider"], "openai-compatible", "{backend:?}: {h}");
        assert_eq!(rc["model"], "judge-model");
        assert_eq!(rc["snapshot"], "fp_cli");
        assert_eq!(
            (rc["tokens_in"].clone(), rc["tokens_out"].clone()),
            (json!(10), json!(10))
        );
        assert_eq!(
            (rc["attempt"].clone(), rc["outcome"].clone()),
            (json!(1), json!("valid"))
        );
        assert!(rc["latency_ms"].is_u64());
        assert!(
            run["context_digest"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
        assert_eq!(run["detail"], Value::Null);
        let text = s.env.ok(Some(&s.rev), &["history", "ex-1"]);
        assert!(
            text.contains("call sample 0 attempt 1: openai-compatible judge-model snapshot fp_cli, tokens 10 in 10 out")
                && text.contains(", valid"),
            "{backend:?}: {text}"
        );

        // A reply with two answers: unavailable, and the stored receipt keeps the full detail.
        let srv = server(Reply::TwoChoices);
        let s = setup_on(backend, "pass", &srv.url, None);
        let stdout = exits(&s.verify(&s.rev, &[]), 1);
        assert!(
            stdout.contains(" unavailable invalid_output: the response has 2 choices"),
            "{stdout}"
        );
        let h = history(&s);
        let run = &h["runs"][0];
        assert_eq!(run["status"], "unavailable", "{backend:?}: {h}");
        assert_eq!(run["receipts"][0]["outcome"], "invalid_output");
        assert!(
            run["receipts"][0]["detail"]
                .as_str()
                .unwrap()
                .contains("2 choices")
                && run["detail"].as_str().unwrap().contains("2 choices"),
            "{backend:?}: {h}"
        );
        let (_, decision) = s.gate();
        assert_ne!(decision["outcome"], "pass", "{decision}");
    }
}

#[test]
fn an_echoed_key_reaches_neither_output_nor_the_store() {
    let key = long_key();
    for backend in BACKENDS {
        let srv = server(Reply::EchoKey);
        let s = setup_on(backend, "pass", &srv.url, Some(KEY_VAR));
        let out = s.verify(&s.rev, &[]);
        let stdout = exits(&out, 1);
        assert!(stdout.contains(" unavailable provider_error"), "{stdout}");
        assert!(stdout.contains("[redacted]"), "{stdout}");
        let shown = format!(
            "{stdout}\n{}\n{}\n{}",
            text(&out.stderr),
            s.env.ok(Some(&s.rev), &["history", "ex-1", "--json"]),
            s.env.ok(Some(&s.rev), &["history", "ex-1"]),
        );
        for i in 0..=key.len() - 12 {
            assert!(
                !shown.contains(&key[i..i + 12]),
                "{backend:?}: {:?} of the key is shown:\n{shown}",
                &key[i..i + 12]
            );
        }
    }
}

#[test]
fn the_cache_reuses_only_valid_results_and_lives_under_verdict_home() {
    for backend in BACKENDS {
        let srv = server(Reply::Valid);
        let s = setup_on(backend, "pass", &srv.url, None);
        exits(&s.verify(&s.rev, &[]), 0);
        assert_eq!(srv.calls.load(Ordering::SeqCst), 1);
        let cache = s.env.dir.path().join("home/judge-cache");
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1, "{backend:?}");

        // The same context, model and prompt: reused, no call, and the run says so.
        let out = s.verify(&s.rev, &[]);
        exits(&out, 0);
        assert_eq!(
            srv.calls.load(Ordering::SeqCst),
            1,
            "{backend:?}: the model was called"
        );
        assert!(
            text(&out.stderr).contains("reused from the cache"),
            "{}",
            text(&out.stderr)
        );
        let h = history(&s);
        assert_eq!(
            h["runs"][1]["cache_key"]
                .as_str()
                .map(|k| k.starts_with("sha256:")),
            Some(true),
            "{h}"
        );
        assert_eq!(h["runs"][1]["receipts"], json!([]));
        assert_eq!(h["runs"][1]["counted"], true);

        // --no-cache calls; a damaged entry is a miss; deleting the directory clears it.
        exits(&s.verify(&s.rev, &["--no-cache"]), 0);
        assert_eq!(srv.calls.load(Ordering::SeqCst), 2);
        for e in std::fs::read_dir(&cache).unwrap() {
            let p = e.unwrap().path();
            let doc = std::fs::read_to_string(&p).unwrap();
            std::fs::write(&p, doc.replace("\"ev-1\"", "\"objective\"")).unwrap();
        }
        exits(&s.verify(&s.rev, &[]), 0);
        assert_eq!(
            srv.calls.load(Ordering::SeqCst),
            3,
            "a damaged entry was served"
        );
        std::fs::remove_dir_all(&cache).unwrap();
        exits(&s.verify(&s.rev, &[]), 0);
        assert_eq!(srv.calls.load(Ordering::SeqCst), 4);
        let (_, decision) = s.gate();
        assert_eq!(decision["outcome"], "pass", "{decision}");

        // An unavailable result is never reused.
        let srv = server(Reply::Garbage);
        let s = setup_on(backend, "pass", &srv.url, None);
        exits(&s.verify(&s.rev, &[]), 1);
        exits(&s.verify(&s.rev, &[]), 1);
        assert_eq!(srv.calls.load(Ordering::SeqCst), 2, "{backend:?}");
    }
}

#[test]
fn a_cost_cap_on_a_class_without_prices_is_refused_before_any_run() {
    let srv = server(Reply::Valid);
    let s = setup("pass", &srv.url);
    let capped = s.env.ok(
        Some(&s.coder),
        &[
            "request",
            "create",
            "ex-1",
            "--budget",
            r#"{"max_cost": 1}"#,
        ],
    );
    let out = s.verify_request(&capped, &s.rev, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("no provider.price"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(srv.calls.load(Ordering::SeqCst), 0);
    assert_eq!(history(&s)["runs"], json!([]));
}

/// The number of events in the store's audit chain, which must be intact.
fn chain_events(s: &Setup) -> u64 {
    let out = s.env.ok(Some(&s.ops), &["audit", "verify"]);
    let tail = out
        .split("audit chain intact: ")
        .nth(1)
        .unwrap_or_else(|| panic!("{out}"));
    tail.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn an_admission_refused_for_the_run_cap_appends_nothing() {
    for backend in BACKENDS {
        let srv = server(Reply::Valid);
        let s = setup_on(backend, "pass", &srv.url, None);
        let capped = s.env.ok(
            Some(&s.coder),
            &[
                "request",
                "create",
                "ex-1",
                "--budget",
                r#"{"max_runs": 1}"#,
            ],
        );
        exits(&s.verify_request(&capped, &s.rev, &[]), 0);
        let (events, calls) = (chain_events(&s), srv.calls.load(Ordering::SeqCst));
        let admit = |token: &str, run: &str| {
            s.env.run(
                Some(token),
                &[
                    "run",
                    "admit",
                    &capped,
                    "--verifier",
                    "rev",
                    "--class",
                    "reviewer",
                    "--run",
                    run,
                ],
            )
        };
        // `verify` again, and `run admit` by the verifier and by an operator: each is refused
        // for the cap, and the audit chain is as it was.
        for (what, out) in [
            ("verify", s.verify_request(&capped, &s.rev, &[])),
            ("verify", s.verify_request(&capped, &s.rev, &[])),
            ("run admit as rev", admit(&s.rev, "run-2")),
            ("run admit as ops", admit(&s.ops, "run-3")),
        ] {
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{backend:?} {what}: {err}");
            assert!(
                err.contains("allows 1 run(s) and 1 were admitted"),
                "{backend:?} {what}: {err}"
            );
            assert_eq!(chain_events(&s), events, "{backend:?} {what}");
        }
        assert_eq!(srv.calls.load(Ordering::SeqCst), calls, "{backend:?}");
    }
}
