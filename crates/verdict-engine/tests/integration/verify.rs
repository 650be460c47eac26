//! `Engine::verify_request`, the model verifier's use case, against a fake OpenAI-compatible
//! server on loopback, on both backends: a whole request verified, the request's caps on a
//! class's budget, a result the engine refuses, and inputs refused before any run.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common::{
    EXEC, World, allow_inserts, evidence, on_both, on_both_at, refuse_inserts, world,
};
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
    /// so two calls report the same problem in different words.
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

/// A run whose result the store refuses (here a fault injected where findings are written) ends
/// `unavailable` with why, instead of staying open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_the_engine_refuses_ends_its_run_unavailable_instead_of_open() {
    on_both_at(|store, location| async move {
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
        refuse_inserts(&location, "findings").await;
        let second = verify(&w, &req, &file, &inputs(), &VerifyOptions::default())
            .await
            .unwrap();
        allow_inserts(&location, "findings").await;
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

/// The id anyone can derive for the fake's finding on `subject` from what the problem is: the
/// hash the judge gives a finding within a run, before the run's secret.
fn derivable_finding_id(subject: &Digest) -> String {
    let key = json!({
        "subject_digest": subject, "criterion": "tests-pass", "type": "unbounded_retry",
        "severity": "major", "scope": "change", "location": {"resource": "diff"},
    });
    let d = verdict_core::digest::digest(verdict_core::digest::DigestKind::Finding, &key);
    format!("f-{}", &d.as_str()[7..31])
}

/// Two runs that report the same problem in other words (the fake words its remediation after
/// the call) are both stored and both counted, each finding under an id of its own run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_reporting_one_problem_in_other_words_are_both_kept() {
    on_both(|store| async move {
        let srv = fake(Reply::Finding).await;
        let w = world(store).await;
        let req = requested(&w, json!({})).await;
        let file = verifiers(&srv.url, false);
        let mut ids = Vec::new();
        for _ in 0..2 {
            let runs = verify(&w, &req, &file, &inputs(), &VerifyOptions::default())
                .await
                .unwrap();
            let j = judged(&runs[0]);
            assert_eq!(j.status, VerificationStatus::Completed, "{j:?}");
            assert!(j.submitted.as_ref().unwrap().counted, "{j:?}");
            let history = w.engine.history(&w.ops, EXEC).await.unwrap();
            assert!(history.runs.iter().all(|r| r.status == "completed"));
            ids.push(runs[0].run_id.to_string());
        }
        let subject = crate::common::current_subject(&w).await;
        let stored: Vec<verdict_core::contracts::Finding> = w
            .engine
            .store()
            .list(
                verdict_store::DocKind::Finding,
                &verdict_store::About::Subject(subject.clone()),
            )
            .await
            .unwrap()
            .iter()
            .map(|row| row.decode().unwrap())
            .collect();
        assert_eq!(stored.len(), 2, "{stored:?}");
        assert_ne!(stored[0].id, stored[1].id);
        assert_ne!(stored[0].remediation, stored[1].remediation);
        let derivable = derivable_finding_id(&subject);
        assert!(
            stored.iter().all(|f| f.id.as_str() != derivable),
            "{stored:?}"
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome.as_str(), "rework", "{:?}", g.decision);
    })
    .await;
}

/// A second verifier stores, first, a harmless finding under the id anyone can derive for the
/// problem the honest reviewer is about to report, beside its own passing result. The honest
/// run's failing result is still stored and counted, so the Gate says `rework`: nobody keeps
/// another verifier's result out by taking the ids it will use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finding_id_taken_first_by_another_verifier_keeps_no_result_out() {
    on_both(|store| async move {
        let srv = fake(Reply::Finding).await;
        let w = world(store).await;
        let req = requested(&w, json!({})).await;
        let subject = crate::common::current_subject(&w).await;
        let pre = w
            .engine
            .admit(&w.rev2, &req, "rev2", "reviewer", "squat-run")
            .await
            .unwrap();
        assert!(!pre.skipped, "{pre:?}");
        let ev = evidence(&subject, "pass", "ci", "runner");
        let mut squat =
            crate::common::result("rev2", "squat-run", &subject, 1, ev["id"].as_str().unwrap());
        squat["findings"] = json!([{
            "id": derivable_finding_id(&subject), "version": 1, "criterion": "tests-pass",
            "type": "nit", "severity": "info", "scope": "pre_existing",
            "subject_digest": subject.as_str(), "evidence_refs": ["diff"], "method": "squat",
        }]);
        assert!(
            w.engine
                .submit_result(&w.rev2, &squat)
                .await
                .unwrap()
                .counted
        );

        let file = verifiers(&srv.url, false);
        let runs = verify(&w, &req, &file, &inputs(), &VerifyOptions::default())
            .await
            .unwrap();
        let j = judged(&runs[0]);
        assert_eq!(j.status, VerificationStatus::Completed, "{j:?}");
        assert!(j.submitted.as_ref().unwrap().counted, "{j:?}");
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome.as_str(), "rework", "{:?}", g.decision);
        assert!(
            g.decision
                .reasons
                .iter()
                .any(|r| r.code.as_str() == "criterion_failed"),
            "{:?}",
            g.decision.reasons
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
                ..VerifyOptions::default()
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

/// What a hostile (or merely broken) provider answers instead of an honest reply.
#[derive(Clone, Copy)]
enum Hostile {
    /// A passing reply whose usage claims 2^53 - 1 tokens in and out: each count alone is a
    /// number a document may hold, their sum is not.
    UsageNoCallReaches,
    /// A passing reply whose usage is the most one call may report, in and out.
    UsageAtTheBound,
    /// HTTP 500 whose body holds U+0000, as a raw byte and as an escape.
    NulErrorBody,
}

async fn hostile_answer(
    State((mode, calls)): State<(Hostile, Arc<AtomicUsize>)>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let usage = |n: u64| json!({"prompt_tokens": n, "completion_tokens": n});
    match mode {
        Hostile::UsageNoCallReaches | Hostile::UsageAtTheBound => {
            let axum::Json(mut reply) = answer(State((Reply::Pass, calls)), body).await;
            reply["usage"] = match mode {
                Hostile::UsageNoCallReaches => usage(9_007_199_254_740_991),
                _ => usage(verdict_judge::tokens::MAX_REPORTED_TOKENS),
            };
            axum::Json(reply).into_response()
        }
        Hostile::NulErrorBody => {
            calls.fetch_add(1, Ordering::SeqCst);
            (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                b"{\"error\":\"boom\x00\\u0000\"}".to_vec(),
            )
                .into_response()
        }
    }
}

async fn hostile(mode: Hostile) -> Fake {
    let calls = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = Router::new()
        .fallback(hostile_answer)
        .with_state((mode, calls.clone()));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Fake { url, calls }
}

/// Every read of the execution works after run `run_id`, which shows `status` with its
/// receipts and detail; the chain is checked by `on_both`. Returns the run as history shows it.
async fn every_read_works(w: &World, run_id: &str, status: &str) -> verdict_engine::RunView {
    w.engine.status(&w.ops, EXEC).await.unwrap();
    w.engine.gate_run(&w.ops, EXEC).await.unwrap();
    let window = verdict_engine::ledger::Window {
        attempts: 100,
        days: 30,
        min_sample: 1,
    };
    w.engine.ledger(&w.ops, window).await.unwrap();
    let contexts = w.engine.run_contexts(&w.rev, run_id).await.unwrap();
    assert!(!contexts.is_empty(), "the run's record is stored");
    let history = w.engine.history(&w.ops, EXEC).await.unwrap();
    let shown = history
        .runs
        .into_iter()
        .find(|r| r.run_id == run_id)
        .unwrap();
    assert_eq!(shown.status, status, "{shown:?}");
    shown
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_no_call_can_reach_is_refused_and_the_run_keeps_its_receipt() {
    on_both(|store| async move {
        let srv = hostile(Hostile::UsageNoCallReaches).await;
        let w = world(store).await;
        let req = requested(&w, json!({"max_total_tokens": 100_000})).await;
        let runs = verify(
            &w,
            &req,
            &verifiers(&srv.url, true),
            &inputs(),
            &VerifyOptions::default(),
        )
        .await
        .unwrap();
        let j = judged(&runs[0]);
        assert_eq!(j.status, VerificationStatus::Unavailable, "{j:?}");
        assert_eq!(j.reason, Some(UnavailableReason::ProviderError));
        let detail = j.detail.as_deref().unwrap();
        assert!(
            detail.contains("9007199254740991 input tokens") && detail.contains("1000000000"),
            "{detail}"
        );
        assert!(!runs[0].completed());
        let shown = every_read_works(&w, runs[0].run_id.as_str(), "unavailable").await;
        assert_eq!(shown.detail.as_deref(), Some(detail));
        assert_eq!(shown.receipts.len(), 1, "{shown:?}");
        let r = &shown.receipts[0];
        assert_eq!(r.outcome, "protocol_error");
        assert!(
            r.detail.as_deref().unwrap().contains("9007199254740991"),
            "{r:?}"
        );
        // The counts no call can reach are neither kept nor charged.
        assert_eq!(
            (r.tokens_in, r.tokens_charged, r.cost_estimate),
            (None, None, None)
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_usage_at_the_dearest_price_leaves_a_readable_record() {
    on_both(|store| async move {
        let srv = hostile(Hostile::UsageAtTheBound).await;
        let w = world(store).await;
        let req = requested(&w, json!({})).await;
        // A price past what a file may set is refused with the file and the field named, in
        // YAML as in JSON (whose strict reader refuses 1e25 as a number already).
        let yaml = format!(
            "version: 1\nclasses:\n  reviewer:\n    provider: {{kind: openai, base_url: '{}', model: judge-model, price: {{input_per_mtok: 1e25, output_per_mtok: 1}}}}\n",
            srv.url
        );
        let mut doc = json!({"version": 1, "classes": {"reviewer": {"provider": {
            "kind": "openai", "base_url": srv.url, "model": "judge-model",
            "price": {"input_per_mtok": 1e25, "output_per_mtok": 1.0}}}}});
        for (text, origin) in [
            (yaml, "team/verifiers.yaml"),
            (doc.to_string(), "team/verifiers.json"),
        ] {
            let err = VerifiersFile::parse(text.as_bytes(), origin)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("{origin}: "))
                    && (err.contains("price.input_per_mtok")
                        || err.contains("price/input_per_mtok")),
                "{err}"
            );
        }
        // The dearest price a file may set, over the most a call may report.
        let dear = verdict_judge::config::MAX_PRICE_PER_MTOK;
        doc["classes"]["reviewer"]["provider"]["price"] =
            json!({"input_per_mtok": dear, "output_per_mtok": dear});
        let file = VerifiersFile::parse(doc.to_string().as_bytes(), "verifiers").unwrap();
        let runs = verify(&w, &req, &file, &inputs(), &VerifyOptions::default())
            .await
            .unwrap();
        assert!(runs[0].completed(), "{runs:?}");
        let shown = every_read_works(&w, runs[0].run_id.as_str(), "completed").await;
        let r = &shown.receipts[0];
        let most = verdict_judge::tokens::MAX_REPORTED_TOKENS;
        assert_eq!(r.tokens_charged, Some(2 * most), "{r:?}");
        let cost = r.cost_estimate.unwrap();
        assert!(cost > 1e12 && cost < 9_007_199_254_740_991.0, "{cost}");
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome.as_str(), "pass", "{:?}", g.decision);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_no_file_may_set_is_held_inside_what_a_record_may_hold() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w, json!({})).await;
        // A class built without the file's checks, as an embedding program may: the cost is
        // still never stored past ±(2^53 - 1).
        let file = verifiers(&srv.url, true);
        let classes = |name: &str| {
            let mut c = file
                .class(name, Path::new("."))
                .map_err(|e| e.to_string())?;
            if let verdict_judge::config::ProviderConfig::Openai { price, .. } =
                &mut c.config.provider
            {
                *price = Some(verdict_judge::config::Price {
                    input_per_mtok: 1e25,
                    output_per_mtok: 1e25,
                });
            }
            Ok(c)
        };
        let runs = w
            .engine
            .verify_request(&w.rev, &req, &inputs(), &classes, &VerifyOptions::default())
            .await
            .unwrap();
        assert!(runs[0].completed(), "{runs:?}");
        let shown = every_read_works(&w, runs[0].run_id.as_str(), "completed").await;
        let cost = shown.receipts[0].cost_estimate.unwrap();
        assert!(cost <= 9_007_199_254_740_991.0, "{cost}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_in_a_provider_error_body_is_escaped_and_the_run_keeps_its_detail() {
    on_both(|store| async move {
        let srv = hostile(Hostile::NulErrorBody).await;
        let w = world(store).await;
        let req = requested(&w, json!({})).await;
        let runs = verify(
            &w,
            &req,
            &verifiers(&srv.url, false),
            &inputs(),
            &VerifyOptions::default(),
        )
        .await
        .unwrap();
        assert_eq!(srv.calls.load(Ordering::SeqCst), 2, "retried once");
        let j = judged(&runs[0]);
        assert_eq!(j.status, VerificationStatus::Unavailable, "{j:?}");
        assert_eq!(j.reason, Some(UnavailableReason::ProviderError));
        let detail = j.detail.as_deref().unwrap();
        assert!(
            detail.contains("http status 500") && detail.contains("boom[U+0000]\\u0000"),
            "{detail}"
        );
        assert!(!detail.contains('\0'));
        let shown = every_read_works(&w, runs[0].run_id.as_str(), "unavailable").await;
        assert_eq!(shown.detail.as_deref(), Some(detail));
        assert_eq!(shown.receipts.len(), 2, "{shown:?}");
        for r in &shown.receipts {
            assert_eq!(r.outcome, "http_500");
            assert!(
                r.detail.as_deref().unwrap().contains("boom[U+0000]"),
                "{r:?}"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_record_is_refused_never_stores_its_result_as_counted() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w, json!({})).await;
        // A class built without the file's checks whose context budget no record may hold:
        // the manifest carries it, so the engine refuses the run's record, on both backends.
        let file = verifiers(&srv.url, false);
        let classes = |name: &str| {
            let mut c = file
                .class(name, Path::new("."))
                .map_err(|e| e.to_string())?;
            c.config.budget.context_tokens = 1 << 60;
            Ok(c)
        };
        let runs = w
            .engine
            .verify_request(&w.rev, &req, &inputs(), &classes, &VerifyOptions::default())
            .await
            .unwrap();
        assert_eq!(srv.calls.load(Ordering::SeqCst), 1, "the model was called");
        let run = &runs[0];
        let j = judged(run);
        // The reply was a valid pass, but without its record it is not kept.
        assert_eq!(j.status, VerificationStatus::Unavailable, "{j:?}");
        assert_eq!(j.reason, Some(UnavailableReason::InvalidOutput));
        let detail = j.detail.as_deref().unwrap();
        assert!(
            detail.starts_with("the engine could not store the run's record")
                && detail.contains("budget_tokens"),
            "{detail}"
        );
        assert!(
            j.submitted.is_some(),
            "the unavailable result ended the run"
        );
        assert!(!run.completed());
        w.engine.status(&w.ops, EXEC).await.unwrap();
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(g.decision.outcome.as_str(), "pass", "{:?}", g.decision);
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        let shown = history
            .runs
            .iter()
            .find(|r| r.run_id == run.run_id.as_str())
            .unwrap();
        assert_eq!(shown.status, "unavailable", "{shown:?}");
    })
    .await;
}
