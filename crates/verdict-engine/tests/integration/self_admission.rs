//! A verifier admitting itself and running its own model verifier (what `verdict verify`
//! does), and the run's context note, on SQLite and PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use async_trait::async_trait;
use common::*;
use serde_json::{Value, json};
use verdict_core::digest::{DigestKind, digest};
use verdict_engine::{ModelVerifier, RunOutcome, VerifyTask};

fn report(manifest: &Value) -> verdict_engine::RunReport {
    verdict_engine::RunReport {
        manifest: manifest.clone(),
        ..Default::default()
    }
}

fn code(e: &verdict_engine::EngineError) -> &'static str {
    e.code()
}

struct Passing;

#[async_trait]
impl ModelVerifier for Passing {
    async fn verify(&self, task: &VerifyTask) -> Result<Value, String> {
        let ev = task.evidence.first().map(|e| e.id.as_str());
        Ok(result(
            task.verifier.as_str(),
            task.run_id.as_str(),
            &task.subject_digest,
            task.generation,
            ev.unwrap_or_default(),
        ))
    }
}

async fn request(w: &World, outcome: &str) -> verdict_core::digest::Digest {
    let d = w
        .engine
        .put_subject(&w.coder, &subject(1, "diff"))
        .await
        .unwrap();
    w.engine
        .add_evidence(&w.ci, &[evidence(&d, outcome, "ci", "runner")])
        .await
        .unwrap();
    w.engine
        .create_request(&w.coder, EXEC, &json!({}))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_admits_itself_runs_its_model_and_records_the_context() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = request(&w, "pass").await;
        let pre = w
            .engine
            .admit(&w.rev, &req, "rev", "reviewer", "run-self")
            .await
            .unwrap();
        assert!(!pre.skipped, "{pre:?}");
        let out = w
            .engine
            .run_model(&w.rev, "run-self", &Passing)
            .await
            .unwrap();
        let RunOutcome::Submitted(s) = out else {
            panic!("skipped: {out:?}");
        };
        assert!(s.counted, "{s:?}");
        let manifest = json!({"schema": "verdict.context-manifest/v1", "entries": []});
        let d = w
            .engine
            .record_run_context(&w.rev, "run-self", &report(&manifest))
            .await
            .unwrap();
        assert_eq!(d, digest(DigestKind::Context, &manifest));
        let notes = w.engine.run_contexts(&w.ops, "run-self").await.unwrap();
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].context_digest, d);
        assert_eq!(notes[0].manifest, manifest);
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome.as_str(), "pass");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_admits_runs_or_records_for_another_verifier_and_producers_never_do() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = request(&w, "pass").await;
        // A verifier cannot admit a colleague, and a producer cannot admit anyone.
        let e = w
            .engine
            .admit(&w.rev, &req, "rev2", "reviewer", "run-x")
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        let e = w
            .engine
            .admit(&w.coder, &req, "coder", "reviewer", "run-y")
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        w.engine
            .admit(&w.rev, &req, "rev", "reviewer", "run-rev")
            .await
            .unwrap();
        // Another verifier can neither start that run nor write its context note.
        let e = w
            .engine
            .run_model(&w.rev2, "run-rev", &Passing)
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        let e = w
            .engine
            .record_run_context(&w.rev2, "run-rev", &report(&json!({})))
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        assert!(
            w.engine
                .run_contexts(&w.ops, "run-rev")
                .await
                .unwrap()
                .is_empty()
        );
        // Nothing was submitted for it either.
        assert!(
            w.engine
                .run_model(&w.coder, "run-rev", &Passing)
                .await
                .is_err()
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(g.decision.outcome.as_str(), "pass");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_admission_still_runs_preflight_and_never_calls_the_model() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = request(&w, "fail").await;
        let pre = w
            .engine
            .admit(&w.rev, &req, "rev", "reviewer", "run-f")
            .await
            .unwrap();
        assert!(pre.skipped);
        assert!(
            pre.reasons.iter().any(|r| r.starts_with("check_failed")),
            "{pre:?}"
        );
        struct Never;
        #[async_trait]
        impl ModelVerifier for Never {
            async fn verify(&self, _: &VerifyTask) -> Result<Value, String> {
                Err("called".into())
            }
        }
        let out = w.engine.run_model(&w.rev, "run-f", &Never).await.unwrap();
        assert!(matches!(out, RunOutcome::Skipped(_)), "{out:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_are_kept_with_the_run_and_a_forged_note_is_not_believed() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = request(&w, "pass").await;
        w.engine
            .admit(&w.rev, &req, "rev", "reviewer", "run-r")
            .await
            .unwrap();
        let subject = w
            .engine
            .store()
            .run("run-r")
            .await
            .unwrap()
            .unwrap()
            .admission
            .subject_digest;
        // The producer may append to the requests table; a note shaped like the engine's,
        // with receipts that make the run look cheap and clean, is not the engine's.
        let forged = json!({
            "schema": verdict_engine::RUN_CONTEXT_SCHEMA, "run_id": "run-r",
            "subject_digest": subject.as_str(), "context_digest": subject.as_str(),
            "manifest": {}, "receipts": []
        });
        w.engine
            .store()
            .put(&w.coder.actor(), verdict_store::DocKind::Request, &forged)
            .await
            .unwrap();
        assert!(
            w.engine
                .run_contexts(&w.ops, "run-r")
                .await
                .unwrap()
                .is_empty()
        );

        let receipt: verdict_judge::receipt::Receipt = serde_json::from_value(json!({
            "sample": 0, "attempt": 2, "provider": "openai-compatible", "model": "judge-model",
            "snapshot": "fp_1", "nonce": "00112233445566778899aabbccddeeff",
            "tokens_in": 1200, "tokens_out": 900000, "tokens_estimated": false,
            "cost_estimate": 27.0, "latency_ms": 812, "outcome": "budget_exhausted",
            "detail": "token budget: the call reported 1200 tokens in and 900000 out"
        }))
        .unwrap();
        let report = verdict_engine::RunReport {
            manifest: json!({"entries": []}),
            receipts: vec![receipt.clone()],
            detail: Some("token budget: over the cap 20000".into()),
            cache_key: None,
        };
        w.engine
            .record_run_context(&w.rev, "run-r", &report)
            .await
            .unwrap();
        let notes = w.engine.run_contexts(&w.ops, "run-r").await.unwrap();
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].receipts, std::slice::from_ref(&receipt));
        let h = w.engine.history(&w.ops, EXEC).await.unwrap();
        let run = h.runs.iter().find(|r| r.run_id == "run-r").unwrap();
        assert_eq!(run.receipts, [receipt]);
        assert_eq!(
            run.detail.as_deref(),
            Some("token budget: over the cap 20000")
        );
        assert_eq!(run.context_digest.as_ref(), Some(&notes[0].context_digest));
    })
    .await;
}

/// Who the audit chain says appended the row `key` of `table`.
async fn writer_of(w: &World, table: &str, key: &str) -> Vec<(String, String)> {
    w.engine
        .store()
        .audit_events(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.table == table && e.key == key)
        .map(|e| (e.principal, e.role))
        .collect()
}

fn by(principal: &str, role: &str) -> Vec<(String, String)> {
    vec![(principal.to_owned(), role.to_owned())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_chain_names_the_admitting_caller_not_the_engine() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = request(&w, "pass").await;
        w.engine
            .admit(&w.rev, &req, "rev", "reviewer", "run-own")
            .await
            .unwrap();
        w.engine
            .admit(&w.ops, &req, "rev2", "reviewer", "run-ops")
            .await
            .unwrap();
        assert_eq!(
            writer_of(&w, "verifier_runs", "run-own").await,
            by("rev", "verifier")
        );
        assert_eq!(
            writer_of(&w, "verifier_runs", "run-ops").await,
            by("ops", "operator")
        );
        // Each note was written by its admission's writer, and both are believed.
        let notes = w.engine.admission_notes(&w.ops, EXEC).await.unwrap();
        assert_eq!(notes.len(), 2, "{notes:?}");
        for (run, who) in [
            ("run-own", by("rev", "verifier")),
            ("run-ops", by("ops", "operator")),
        ] {
            assert!(notes.iter().any(|n| n.run_id.as_str() == run));
            let rows = w
                .engine
                .store()
                .list(
                    verdict_store::DocKind::Request,
                    &verdict_store::About::Execution(EXEC.to_owned()),
                )
                .await
                .unwrap();
            let row = rows
                .iter()
                .find(|r| {
                    let v = r.value().unwrap();
                    v["schema"] == "verdict.admission/v1" && v["run_id"] == run
                })
                .unwrap();
            assert_eq!(writer_of(&w, "verification_requests", &row.key).await, who);
        }

        // A run preflight ends at admission is cancelled by the verifier admitting itself.
        let failing = w
            .engine
            .put_subject(&w.coder, &subject(2, "diff-2"))
            .await
            .unwrap();
        w.engine
            .add_evidence(&w.ci, &[evidence(&failing, "fail", "ci", "runner")])
            .await
            .unwrap();
        let req2 = w
            .engine
            .create_request(&w.coder, EXEC, &json!({}))
            .await
            .unwrap();
        let pre = w
            .engine
            .admit(&w.rev, &req2, "rev", "reviewer", "run-skip")
            .await
            .unwrap();
        assert!(pre.skipped, "{pre:?}");
        assert_eq!(
            writer_of(&w, "run_events", "run-skip#1").await,
            by("rev", "verifier")
        );
        assert!(
            w.engine
                .store()
                .verify_audit(None)
                .await
                .unwrap()
                .is_intact()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_writing_at_the_store_admits_only_itself_under_a_grant() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = request(&w, "pass").await;
        let subject = w
            .engine
            .store()
            .get(verdict_store::DocKind::Request, &req)
            .await
            .unwrap()
            .unwrap()
            .value()
            .unwrap()["subject_digest"]
            .as_str()
            .unwrap()
            .parse::<verdict_core::digest::Digest>()
            .unwrap();
        let admission = |verifier: &str, run: &str| verdict_store::RunAdmission {
            run_id: run.parse().unwrap(),
            request_digest: req.clone(),
            subject_digest: subject.clone(),
            verifier: verifier.parse().unwrap(),
            class: "reviewer".parse().unwrap(),
            admitted_generation: 1,
        };
        let note = |verifier: &str, run: &str| {
            json!({
                "schema": "verdict.admission/v1", "run_id": run, "request_digest": req.as_str(),
                "subject_digest": subject.as_str(), "generation": 1, "verifier": verifier,
                "class": "reviewer",
                "preflight": {"outcome": "pass", "skipped": false, "reasons": []}
            })
        };
        let store = w.engine.store();
        let rev = w.rev.actor();
        // Another verifier's admission, or a note naming another, is refused; nothing is kept.
        assert!(
            store
                .admit_run_noted(&rev, &admission("rev2", "run-a"), &note("rev2", "run-a"))
                .await
                .is_err()
        );
        assert!(
            store
                .admit_run_noted(&rev, &admission("rev", "run-b"), &note("rev2", "run-b"))
                .await
                .is_err()
        );
        assert!(store.run("run-a").await.unwrap().is_none());
        assert!(store.run("run-b").await.unwrap().is_none());
        // A verifier appends nothing else to the requests table: no request, no engine note.
        let cancellation = json!({
            "schema": "verdict.cancellation/v1", "cancelled": {"kind": "execution", "id": EXEC},
            "subject_digest": subject.as_str(), "by": {"principal": "rev", "role": "verifier"},
            "reason": "forged", "at": "2026-01-01T00:00:00Z"
        });
        assert!(
            store
                .put(&rev, verdict_store::DocKind::Request, &cancellation)
                .await
                .is_err()
        );
        // Its own admission, with its note, is kept, and the engine believes the note.
        store
            .admit_run_noted(&rev, &admission("rev", "run-c"), &note("rev", "run-c"))
            .await
            .unwrap();
        let notes = w.engine.admission_notes(&w.ops, EXEC).await.unwrap();
        assert_eq!(notes.len(), 1);
        // Once its grant is revoked it admits itself no more.
        w.engine.revoke(&w.ops, "g-rev", "done").await.unwrap();
        assert!(
            store
                .admit_run_noted(&rev, &admission("rev", "run-d"), &note("rev", "run-d"))
                .await
                .is_err()
        );
        assert!(store.run("run-d").await.unwrap().is_none());
        assert!(w.engine.status(&w.ops, EXEC).await.is_ok());
    })
    .await;
}

/// Issue 13: a verifier admitting itself on a cancelled execution is refused (by the engine on
/// both backends, and on PostgreSQL by the database too when the store is written directly),
/// and so is a note saying preflight did not decide a request for which preflight's stored
/// verdict says it did. The engine's own admission ends a run preflight stopped in the same
/// transaction. Each refusal writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_admission_is_held_to_preflight_and_to_cancellation() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = request(&w, "fail").await;
        let pre = w
            .engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-op")
            .await
            .unwrap();
        assert!(pre.skipped, "{pre:?}");
        let store = w.engine.store();
        let run = store.run("run-op").await.unwrap().unwrap();
        assert_eq!(run.status(), Some(verdict_store::RunStatus::Cancelled));
        // The run's end was appended right after its note, in the admitting transaction.
        let events = store.audit_events(run.seq, 2).await.unwrap();
        assert_eq!(
            events.iter().map(|e| e.table.as_str()).collect::<Vec<_>>(),
            ["verification_requests", "run_events"]
        );
        let subject = run.admission.subject_digest.clone();
        let admission = |run: &str| verdict_store::RunAdmission {
            run_id: run.parse().unwrap(),
            request_digest: req.clone(),
            subject_digest: subject.clone(),
            verifier: "rev".parse().unwrap(),
            class: "reviewer".parse().unwrap(),
            admitted_generation: 1,
        };
        let note = |run: &str| {
            json!({
                "schema": "verdict.admission/v1", "run_id": run, "request_digest": req.as_str(),
                "subject_digest": subject.as_str(), "generation": 1, "verifier": "rev",
                "class": "reviewer",
                "preflight": {"outcome": "pass", "skipped": false, "reasons": []}
            })
        };
        let postgres = store.describe().starts_with("postgres");
        let before = store.audit_head().await.unwrap().unwrap().seq;
        if postgres {
            let e = store
                .admit_run_noted(&w.rev.actor(), &admission("run-lie"), &note("run-lie"))
                .await
                .unwrap_err();
            assert!(e.to_string().contains("preflight already decided"), "{e}");
            assert!(store.run("run-lie").await.unwrap().is_none());
        }
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, before);

        // The execution is cancelled: no verifier admits itself to it any more.
        w.engine
            .cancel_execution(&w.ops, EXEC, "withdrawn")
            .await
            .unwrap();
        let before = store.audit_head().await.unwrap().unwrap().seq;
        let e = w
            .engine
            .admit(&w.rev, &req, "rev", "reviewer", "run-late")
            .await
            .unwrap_err();
        assert_eq!(e.code(), "conflict", "{e}");
        assert!(e.to_string().contains("cancelled"), "{e}");
        if postgres {
            let mut late = note("run-late");
            late["preflight"] =
                json!({"outcome": "rework", "skipped": true, "reasons": ["check_failed: x"]});
            let e = store
                .admit_run_noted(&w.rev.actor(), &admission("run-late"), &late)
                .await
                .unwrap_err();
            assert!(e.to_string().contains("was cancelled"), "{e}");
        }
        assert!(store.run("run-late").await.unwrap().is_none());
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, before);
    })
    .await;
}
