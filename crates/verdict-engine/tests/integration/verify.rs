//! `Engine::verify_request`, the model verifier's use case, against a fake OpenAI-compatible
//! server on loopback, on both backends: a whole request verified, the request's caps on a
//! class's budget, a result the engine refuses, and inputs refused before any run.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common::{EXEC, World, evidence, on_both, world};
use axum::Router;
use axum::extract::State;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use verdict_core::contracts::{UnavailableReason, VerificationStatus};
use verdict_core::digest::Digest;
use verdict_engine::{
    ClassOutcome, ClassRun, InputError, Judged, VerifyError, VerifyInputs, VerifyOptions,
};
use verdict_judge::config::VerifiersFile;

pub(crate) const OBJECTIVE: &str = "Retry a failed charge once";
pub(crate) const DIFF: &str = "--- a/pay.rs\n+++ b/pay.rs\n+    charge_again();\n";

#[derive(Clone, Copy)]
pub(crate) enum Reply {
    /// Every criterion passed, citing the diff.
    Pass,
    /// The criterion failed with one finding whose remediation names the call it came from,
    /// so two calls report the same finding (same id and version) with different bodies.
    Finding,
}

pub(crate) struct Fake {
    pub(crate) url: String,
    pub(crate) calls: Arc<AtomicUsize>,
}

fn nonce_of(system: &str) -> String {
    let tag = "Rules for this request (nonce ";
    let at = system.find(tag).expect("nonce line") + tag.len();
    system[at..at + 32].to_owned()
}

pub(crate) async fn answer(
    State((mode, calls)): State<(Reply, Arc<AtomicUsize>)>,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    let call = calls.fetch_add(1, Ordering::SeqCst);
    let req: Value = serde_json::from_slice(&body).unwrap();
    let system = req["messages"][0]["content"].as_str().unwrap_or_default();
    let reply = match mode {
        Reply::Pass => json!({"nonce": nonce_of(system), "findings": [], "dispositions": [],
            "criteria": [{"id": "tests-pass", "status": "passed", "evidence_refs": ["diff"],
                          "rationale": "the diff retries once"}]}),
        Reply::Finding => json!({"nonce": nonce_of(system), "dispositions": [],
            "criteria": [{"id": "tests-pass", "status": "failed", "evidence_refs": ["diff"],
                          "rationale": "it retries forever"}],
            "findings": [{"criterion": "tests-pass", "type": "unbounded_retry",
                          "severity": "major", "scope": "change",
                          "location": {"resource": "diff", "path": null, "line": null},
                          "evidence_refs": ["diff"],
                          "remediation": format!("bound the retries (call {call})"),
                          "confidence": null}]}),
    };
    axum::Json(json!({
        "id": "c-1", "model": "judge-model", "system_fingerprint": "fp_engine",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": reply.to_string()}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10}
    }))
}

pub(crate) async fn fake(mode: Reply) -> Fake {
    let calls = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = Router::new()
        .fallback(answer)
        .with_state((mode, calls.clone()));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Fake { url, calls }
}

/// The verifiers configuration: one `reviewer` class on the fake server, `price` optional.
pub(crate) fn verifiers(url: &str, priced: bool) -> VerifiersFile {
    let mut provider = json!({"kind": "openai", "base_url": url, "model": "judge-model"});
    if priced {
        provider["price"] = json!({"input_per_mtok": 1.0, "output_per_mtok": 1.0});
    }
    let doc = json!({"version": 1, "classes": {"reviewer": {
        "provider": provider, "cache": false,
        "budget": {"timeout_s": 20, "max_attempts": 2, "backoff_ms": 10}}}});
    VerifiersFile::parse(doc.to_string().as_bytes(), "verifiers").unwrap()
}

pub(crate) fn inputs() -> VerifyInputs {
    VerifyInputs {
        objective: OBJECTIVE.as_bytes().to_vec(),
        resources: vec![("diff".to_owned(), DIFF.as_bytes().to_vec())],
    }
}

/// The world's subject, pinning [`OBJECTIVE`] and [`DIFF`], with passing check evidence, and the
/// producer's request with `budget`.
async fn requested(w: &World, budget: Value) -> Digest {
    let mut subject = crate::common::subject(1, DIFF);
    subject["objective"]["digest"] = json!(verdict_core::digest::raw(OBJECTIVE.as_bytes()));
    let d = w.engine.put_subject(&w.coder, &subject).await.unwrap();
    w.engine
        .add_evidence(&w.ci, &[evidence(&d, "pass", "ci", "runner")])
        .await
        .unwrap();
    w.engine
        .create_request(&w.coder, EXEC, &budget)
        .await
        .unwrap()
}

async fn verify(
    w: &World,
    request: &Digest,
    file: &VerifiersFile,
    inputs: &VerifyInputs,
    options: &VerifyOptions,
) -> Result<Vec<ClassRun>, VerifyError> {
    let classes = |name: &str| file.class(name, Path::new(".")).map_err(|e| e.to_string());
    w.engine
        .verify_request(&w.rev, request, inputs, &classes, options)
        .await
}

/// What an input error must be.
type Expect = fn(&InputError) -> bool;

fn judged(run: &ClassRun) -> &Judged {
    match &run.outcome {
        ClassOutcome::Judged(j) => j,
        other => panic!("not judged: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_request_is_verified_recorded_and_passes_the_gate() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w, json!({})).await;
        let mut seen = Vec::new();
        let classes = |name: &str| {
            verifiers(&srv.url, false)
                .class(name, Path::new("."))
                .map_err(|e| e.to_string())
        };
        let runs = w
            .engine
            .verify_request_each(
                &w.rev,
                &req,
                &inputs(),
                &classes,
                &VerifyOptions::default(),
                &mut |r: &ClassRun| seen.push(r.run_id.to_string()),
            )
            .await
            .unwrap();
        assert_eq!(runs.len(), 1, "{runs:?}");
        let run = &runs[0];
        assert_eq!(
            seen,
            vec![run.run_id.to_string()],
            "each run is handed over"
        );
        assert_eq!(run.class.as_str(), "reviewer");
        assert!(run.run_id.as_str().starts_with("vrun-reviewer-"), "{run:?}");
        assert!(run.completed(), "{run:?}");
        let j = judged(run);
        assert_eq!(j.status, VerificationStatus::Completed);
        assert!(j.submitted.as_ref().unwrap().counted);
        assert_eq!(srv.calls.load(Ordering::SeqCst), 1);
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome.as_str(), "pass", "{:?}", g.decision);
        // The run's context and its one call are recorded with it.
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        let shown = &history.runs[0];
        assert_eq!(shown.run_id, run.run_id.as_str());
        assert_eq!(shown.status, "completed");
        assert!(shown.context_digest.is_some(), "{shown:?}");
        assert_eq!(shown.receipts.len(), 1, "{shown:?}");
        assert!(!shown.preflight.skipped);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_over_a_change_withheld_as_history_does_not_pass_the_gate() {
    on_both(|store| async move {
        const HIDDEN: &str = "def login(): disable_auth()\n";
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        // The producer labels part of its change a `transcript`: the model is not shown it.
        let mut subject = crate::common::subject(1, DIFF);
        subject["objective"]["digest"] = json!(verdict_core::digest::raw(OBJECTIVE.as_bytes()));
        subject["resources"].as_array_mut().unwrap().push(json!({
            "name": "login", "kind": "transcript",
            "digest": verdict_core::digest::raw(HIDDEN.as_bytes()).as_str()}));
        let d = w.engine.put_subject(&w.coder, &subject).await.unwrap();
        w.engine
            .add_evidence(&w.ci, &[evidence(&d, "pass", "ci", "runner")])
            .await
            .unwrap();
        let req = w
            .engine
            .create_request(&w.coder, EXEC, &json!({}))
            .await
            .unwrap();
        let mut given = inputs();
        given
            .resources
            .push(("login".to_owned(), HIDDEN.as_bytes().to_vec()));
        let runs = verify(
            &w,
            &req,
            &verifiers(&srv.url, false),
            &given,
            &VerifyOptions::default(),
        )
        .await
        .unwrap();
        let j = judged(&runs[0]);
        assert_eq!(j.status, VerificationStatus::Completed, "{j:?}");
        assert!(j.submitted.as_ref().unwrap().counted);
        // The model's pass is over an incomplete context: it counts as inconclusive.
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(g.decision.outcome.as_str(), "pass", "{:?}", g.decision);
        let shown = serde_json::to_value(&g.decision).unwrap().to_string();
        assert!(shown.contains("criterion_inconclusive"), "{shown}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requests_caps_lower_the_class_budget_and_a_cost_cap_needs_prices() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        // The class allows any number of tokens; the request allows five, fewer than any prompt.
        let req = requested(&w, json!({"max_total_tokens": 5})).await;
        let runs = verify(
            &w,
            &req,
            &verifiers(&srv.url, false),
            &inputs(),
            &VerifyOptions::default(),
        )
        .await
        .unwrap();
        let j = judged(&runs[0]);
        assert_eq!(j.status, VerificationStatus::Unavailable);
        assert_eq!(j.reason, Some(UnavailableReason::BudgetExhausted), "{j:?}");
        assert!(!runs[0].completed());
        assert_eq!(srv.calls.load(Ordering::SeqCst), 0, "no call fits five tokens");
        // A cost cap on a class that has no prices is refused before any run is admitted.
        let costly = w
            .engine
            .create_request(&w.coder, EXEC, &json!({"max_cost": 0.01}))
            .await
            .unwrap();
        let before = w.engine.history(&w.ops, EXEC).await.unwrap().runs.len();
        let err = verify(
            &w,
            &costly,
            &verifiers(&srv.url, false),
            &inputs(),
            &VerifyOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, VerifyError::Class { message, .. } if message.contains("provider.price")),
            "{err}"
        );
        assert_eq!(w.engine.history(&w.ops, EXEC).await.unwrap().runs.len(), before);
        // With prices the same cap runs.
        let runs = verify(
            &w,
            &costly,
            &verifiers(&srv.url, true),
            &inputs(),
            &VerifyOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(srv.calls.load(Ordering::SeqCst), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_the_engine_refuses_ends_its_run_unavailable_instead_of_open() {
    on_both(|store| async move {
        let srv = fake(Reply::Finding).await;
        let w = world(store).await;
        let req = requested(&w, json!({})).await;
        let file = verifiers(&srv.url, false);
        let first = verify(&w, &req, &file, &inputs(), &VerifyOptions::default())
            .await
            .unwrap();
        let j = judged(&first[0]);
        assert_eq!(j.status, VerificationStatus::Completed, "{j:?}");
        assert!(j.submitted.as_ref().unwrap().counted);
        // The second reply reports the same finding (same id and version) with another body,
        // which the store refuses: the judge's result cannot be stored as it is.
        let second = verify(&w, &req, &file, &inputs(), &VerifyOptions::default())
            .await
            .unwrap();
        let run = &second[0];
        let j = judged(run);
        assert_eq!(j.status, VerificationStatus::Unavailable, "{j:?}");
        assert_eq!(j.reason, Some(UnavailableReason::InvalidOutput));
        assert!(
            j.detail
                .as_deref()
                .unwrap()
                .starts_with("the engine refused the result: "),
            "{j:?}"
        );
        assert!(j.submitted.is_some(), "the unavailable result ended it");
        assert!(!run.completed());
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        let shown = history
            .runs
            .iter()
            .find(|r| r.run_id == run.run_id.as_str())
            .unwrap();
        assert_eq!(shown.status, "unavailable", "{shown:?}");
        assert!(
            shown
                .detail
                .as_deref()
                .unwrap()
                .contains("the engine refused the result"),
            "{shown:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_that_do_not_fit_are_refused_before_any_run_or_call() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w, json!({})).await;
        let file = verifiers(&srv.url, false);
        let with = |objective: &[u8], resources: &[(&str, &[u8])]| VerifyInputs {
            objective: objective.to_vec(),
            resources: resources
                .iter()
                .map(|(n, b)| ((*n).to_owned(), b.to_vec()))
                .collect(),
        };
        let good = DIFF.as_bytes();
        let cases: Vec<(VerifyInputs, Vec<String>, Expect)> = vec![
            (
                with(OBJECTIVE.as_bytes(), &[("diff", b"+ other\n")]),
                vec![],
                |e| matches!(e, InputError::ResourceMismatch { name, .. } if name == "diff"),
            ),
            (
                with(OBJECTIVE.as_bytes(), &[("diff", good), ("nope", b"")]),
                vec![],
                |e| matches!(e, InputError::UnknownResource { .. }),
            ),
            (
                with(OBJECTIVE.as_bytes(), &[("diff", good), ("diff", good)]),
                vec![],
                |e| matches!(e, InputError::DuplicateResource { .. }),
            ),
            (
                with(OBJECTIVE.as_bytes(), &[]),
                vec![],
                |e| matches!(e, InputError::MissingResource { name } if name == "diff"),
            ),
            (with(b"another objective", &[("diff", good)]), vec![], |e| {
                matches!(e, InputError::ObjectiveMismatch { .. })
            }),
            (with(&[0xff, 0xfe], &[("diff", good)]), vec![], |e| {
                matches!(e, InputError::ObjectiveNotText)
            }),
            (
                inputs(),
                vec!["security".to_owned()],
                |e| matches!(e, InputError::UnaskedClass { asked, .. } if asked == &["reviewer"]),
            ),
        ];
        for (given, classes, expected) in cases {
            let options = VerifyOptions {
                classes,
                cache: None,
                run_id: None,
                claim: None,
            };
            let err = verify(&w, &req, &file, &given, &options).await.unwrap_err();
            match &err {
                VerifyError::Input(e) => assert!(expected(e), "{e}"),
                other => panic!("not an input error: {other}"),
            }
            assert_eq!(err.code(), "invalid_input");
        }
        assert_eq!(srv.calls.load(Ordering::SeqCst), 0);
        assert!(
            w.engine
                .history(&w.ops, EXEC)
                .await
                .unwrap()
                .runs
                .is_empty()
        );
        // A producer is refused at admission, and its refusal is the engine's.
        let err = w
            .engine
            .verify_request(
                &w.coder,
                &req,
                &inputs(),
                &|name: &str| file.class(name, Path::new(".")).map_err(|e| e.to_string()),
                &VerifyOptions::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), "permission_denied", "{err}");
        assert_eq!(srv.calls.load(Ordering::SeqCst), 0);
        assert!(
            w.engine
                .history(&w.ops, EXEC)
                .await
                .unwrap()
                .runs
                .is_empty()
        );
    })
    .await;
}
