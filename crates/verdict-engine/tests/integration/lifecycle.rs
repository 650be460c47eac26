//! The lifecycle rules of docs/spec/applicability.md and authority.md, each tried against the engine on SQLite and on
//! PostgreSQL with one test body.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use verdict_core::contracts::{GateDecision, HumanVerdict, Outcome};
use verdict_engine::{NotApplicable, RunOutcome};
use verdict_store::{About, DocKind, StoreClock};

fn code(e: &verdict_engine::EngineError) -> &'static str {
    e.code()
}

async fn denials(w: &World) -> usize {
    w.engine.store().denials(0, 10_000).await.unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_on_subject_a_does_not_apply_to_subject_b() {
    on_both(|store| async move {
        let w = world(store).await;
        let a = passed(&w, 1, "change A", "run-a").await;
        assert!(
            w.engine
                .status(&w.ops, EXEC)
                .await
                .unwrap()
                .applicable
                .is_some()
        );
        let b = w
            .engine
            .put_subject(&w.coder, &subject(1, "change B"))
            .await
            .unwrap();
        assert_ne!(a, b);
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none());
        assert_eq!(
            status.latest.unwrap().not_applicable,
            vec![NotApplicable::SubjectMoved]
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(
            g.decision.outcome,
            Outcome::Pass,
            "A's evidence and result must not carry over to B"
        );
        assert_eq!(g.decision.subject_digest.as_ref(), Some(&b));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_to_the_next_generation_inherits_no_pass() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-a").await;
        // The retry changes nothing but the generation.
        w.engine
            .put_subject(&w.coder, &subject(2, "change A"))
            .await
            .unwrap();
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none());
        assert_eq!(
            status.latest.unwrap().not_applicable,
            vec![NotApplicable::GenerationMoved]
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(g.decision.outcome, Outcome::Pass);
        // Going back to the old generation is refused.
        let back = w
            .engine
            .put_subject(&w.coder, &subject(1, "change C"))
            .await
            .unwrap_err();
        assert_eq!(code(&back), "conflict");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_cannot_verify_find_or_decide_and_each_try_is_audited() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        let before = denials(&w).await;
        let mut forged = result("coder", "run-a", &d, 1, &ev);
        let e = w.engine.submit_result(&w.coder, &forged).await.unwrap_err();
        assert_eq!(code(&e), "self_verification_denied");
        forged["verifier"]["principal"] = json!("rev");
        let e = w.engine.submit_result(&w.coder, &forged).await.unwrap_err();
        assert_eq!(code(&e), "self_verification_denied");
        let e = w.engine.refuse_direct(&w.coder, DocKind::Finding).await;
        assert_eq!(code(&e), "self_verification_denied");
        let e = w
            .engine
            .decide(
                &w.coder,
                EXEC,
                HumanVerdict::Approve,
                "looks fine to me",
                &reviewed(&w).await,
            )
            .await
            .unwrap_err();
        assert_eq!(code(&e), "self_verification_denied");
        // The store itself refuses the producer's writes too, whatever the engine does.
        let direct = w
            .engine
            .store()
            .put(&w.coder.actor(), DocKind::Verification, &forged)
            .await;
        assert!(direct.is_err());
        assert_eq!(denials(&w).await, before + 4);
        assert!(
            w.engine
                .store()
                .list(DocKind::Verification, &About::Subject(d.clone()))
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            w.engine
                .store()
                .list(DocKind::HumanDecision, &About::Subject(d))
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_cannot_put_a_subject_or_evidence_for_its_own_subject() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _, _) = prepared(&w, 1, "change A", "run-a").await;
        let mut own = subject(2, "verifier's version");
        own["producer"]["principal"] = json!("rev");
        let e = w.engine.put_subject(&w.rev, &own).await.unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        let e = w
            .engine
            .add_evidence(&w.rev, &[evidence(&d, "pass", "rev", "runner")])
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        // A human may not either, and a decision is never accepted from anyone.
        let e = w
            .engine
            .add_evidence(&w.alice, &[evidence(&d, "pass", "alice", "runner")])
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        let e = w.engine.refuse_direct(&w.ops, DocKind::Decision).await;
        assert_eq!(code(&e), "permission_denied");
        assert_eq!(
            w.engine
                .execution_head(&w.ops, EXEC)
                .await
                .unwrap()
                .unwrap()
                .subject_digest,
            d
        );
        assert_eq!(
            w.engine
                .store()
                .list(DocKind::Evidence, &About::Subject(d))
                .await
                .unwrap()
                .len(),
            1
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gate_runs_at_once_store_one_decision() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        w.engine
            .submit_result(&w.rev, &result("rev", "run-a", &d, 1, &ev))
            .await
            .unwrap();
        let spawn = |p: verdict_engine::Principal| {
            let engine = w.engine.clone();
            tokio::spawn(async move { engine.gate_run(&p, EXEC).await })
        };
        let (x, y) = (spawn(w.ops.clone()), spawn(w.coder.clone()));
        let (x, y) = (x.await.unwrap().unwrap(), y.await.unwrap().unwrap());
        assert_eq!(x.bytes, y.bytes);
        assert_eq!(
            u8::from(x.inserted) + u8::from(y.inserted),
            1,
            "exactly one run stores it"
        );
        let all = w
            .engine
            .store()
            .list(DocKind::Decision, &About::Execution(EXEC.into()))
            .await
            .unwrap();
        assert_eq!(all.len(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_revision_after_a_pass_leaves_it_stored_but_not_applicable() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-a").await;
        w.engine.set_policy(&w.ops, &policy(2)).await.unwrap();
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none(), "a new evaluation is needed");
        let old = status.latest.unwrap();
        assert_eq!(old.decision.outcome, Outcome::Pass);
        assert_eq!(old.not_applicable, vec![NotApplicable::PolicyRevisionMoved]);
        let again = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert!(again.inserted);
        assert_ne!(again.decision.evaluation_key, old.decision.evaluation_key);
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        assert_eq!(history.decisions.len(), 2);
        assert!(!history.decisions[0].applies());
        assert!(history.decisions[1].applies());
        // A policy that would go back a revision is refused.
        assert!(w.engine.set_policy(&w.ops, &policy(1)).await.is_err());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_verifier_finishing_after_the_generation_moved_is_history_only() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d1, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        // The producer retries while the verifier still works on generation 1.
        subject_with_evidence(&w, 2, "change A", "pass").await;
        let late = w
            .engine
            .submit_result(&w.rev, &result("rev", "run-a", &d1, 1, &ev))
            .await
            .unwrap();
        assert!(!late.counted, "{late:?}");
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(g.decision.outcome, Outcome::Pass);
        assert!(
            g.decision
                .reasons
                .iter()
                .any(|r| r.code.as_str() == "verifier_missing")
        );
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        let run = history.runs.iter().find(|r| r.run_id == "run-a").unwrap();
        assert_eq!(run.counted, Some(false));
        assert_eq!(run.generation, 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_revoked_between_admission_and_submission_is_not_counted() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        w.engine
            .revoke(&w.ops, "g-rev", "reviewer rotated out")
            .await
            .unwrap();
        let later = ts("2026-11-30T12:00:01Z");
        w.engine.store().set_manual_time(&later).await.unwrap();
        let sub = w
            .engine
            .submit_result(&w.rev, &result("rev", "run-a", &d, 1, &ev))
            .await
            .unwrap();
        assert!(!sub.counted);
        assert!(
            w.engine
                .store()
                .get(DocKind::Verification, &sub.digest)
                .await
                .unwrap()
                .is_some(),
            "kept as history"
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(g.decision.outcome, Outcome::Pass);
        assert!(
            g.decision
                .reasons
                .iter()
                .any(|r| r.code.as_str() == "verifier_missing")
        );
        // And a revoked verifier is not admitted again.
        let req = w
            .engine
            .create_request(&w.coder, EXEC, &json!({}))
            .await
            .unwrap();
        let e = w
            .engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-b")
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_with_a_failing_required_check_never_calls_the_verifier() {
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "broken", "fail").await;
        let req = request(&w, json!({})).await;
        let pre = w
            .engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-a")
            .await
            .unwrap();
        assert!(pre.skipped);
        assert_eq!(pre.outcome, Outcome::Rework);
        assert!(
            pre.reasons.iter().any(|r| r.starts_with("check_failed")),
            "{pre:?}"
        );
        let model = Counting(AtomicUsize::new(0));
        let out = w.engine.run_model(&w.ops, "run-a", &model).await.unwrap();
        assert!(matches!(out, RunOutcome::Skipped(_)));
        assert_eq!(
            model.0.load(Ordering::SeqCst),
            0,
            "no call reached the verifier"
        );
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        assert_eq!(history.runs[0].status, "cancelled");
        assert!(history.runs[0].preflight.skipped);

        // With the check fixed on a new subject the verifier is called, once.
        subject_with_evidence(&w, 1, "fixed", "pass").await;
        let req = request(&w, json!({})).await;
        assert!(
            !w.engine
                .admit(&w.ops, &req, "rev", "reviewer", "run-b")
                .await
                .unwrap()
                .skipped
        );
        let out = w.engine.run_model(&w.ops, "run-b", &model).await.unwrap();
        assert!(
            matches!(out, RunOutcome::Submitted(ref s) if s.counted),
            "{out:?}"
        );
        assert_eq!(model.0.load(Ordering::SeqCst), 1);
        assert_eq!(
            w.engine
                .gate_run(&w.ops, EXEC)
                .await
                .unwrap()
                .decision
                .outcome,
            Outcome::Pass
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_producer_and_its_run_are_never_admitted_as_verifiers() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _) = subject_with_evidence(&w, 1, "a", "pass").await;
        let req = request(&w, json!({})).await;
        let e = w
            .engine
            .admit(&w.ops, &req, "coder", "reviewer", "run-x")
            .await
            .unwrap_err();
        assert_eq!(code(&e), "self_verification_denied");
        let e = w
            .engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-coder")
            .await
            .unwrap_err();
        assert_eq!(code(&e), "self_verification_denied");
        let e = w
            .engine
            .admit(&w.coder, &req, "rev", "reviewer", "run-y")
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        // A result naming criteria the subject does not have, or refs to nothing, is refused.
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-z")
            .await
            .unwrap();
        let mut bad = result("rev", "run-z", &d, 1, "no-such-evidence");
        let e = w.engine.submit_result(&w.rev, &bad).await.unwrap_err();
        assert_eq!(code(&e), "invalid_input");
        // That refusal ended run-z (unavailable, invalid_output); the next try needs a new run.
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-z2")
            .await
            .unwrap();
        bad["verifier"]["run"] = json!("run-z2");
        bad["criteria"][0]["evidence_refs"] = json!(["diff"]);
        bad["criteria"][0]["id"] = json!("made-up");
        let e = w.engine.submit_result(&w.rev, &bad).await.unwrap_err();
        assert_eq!(code(&e), "invalid_input");
        // Another verifier cannot submit for rev's run.
        let e = w
            .engine
            .submit_result(&w.rev2, &result("rev2", "run-z", &d, 1, "diff"))
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rework_then_fix_carries_the_blocker_and_replay_reproduces_every_decision() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d1, ev, _) = prepared(&w, 1, "first try", "run-a").await;
        let mut r = result("rev", "run-a", &d1, 1, &ev);
        r["criteria"][0]["status"] = json!("failed");
        r["findings"] = json!([{
            "id": "f-1", "version": 1, "criterion": "tests-pass", "type": "bug", "severity": "blocker",
            "scope": "change", "subject_digest": d1.as_str(), "evidence_refs": ["diff"], "method": "review"
        }]);
        w.engine.submit_result(&w.rev, &r).await.unwrap();
        let first = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(first.decision.outcome, Outcome::Rework);

        let (d2, ev2, req2) = prepared(&w, 1, "second try", "run-b").await;
        let request = w.engine.store().get(DocKind::Request, &req2).await.unwrap().unwrap().value().unwrap();
        assert_eq!(request["prior_blockers"], json!([{"id": "f-1", "version": 1}]));
        // Without a disposition of the prior blocker the result is refused, and it ends run-b.
        let e = w.engine.submit_result(&w.rev, &result("rev", "run-b", &d2, 1, &ev2)).await.unwrap_err();
        assert_eq!(code(&e), "invalid_input");
        let req3 = common::request(&w, json!({"max_runs": 2})).await;
        w.engine.admit(&w.ops, &req3, "rev", "reviewer", "run-c").await.unwrap();
        let mut fixed = result("rev", "run-c", &d2, 1, &ev2);
        fixed["dispositions"] = json!([{"finding": "f-1", "version": 1, "disposition": "resolved", "evidence_refs": [ev2]}]);
        w.engine.submit_result(&w.rev, &fixed).await.unwrap();
        let second = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(second.decision.outcome, Outcome::Pass, "{:?}", second.decision.reasons);

        // Human decisions join the bundle of the subject they bind.
        w.engine.decide(&w.alice, EXEC, HumanVerdict::Reject, "not what we agreed", &reviewed(&w).await).await.unwrap();
        let third = w.engine.gate_run(&w.alice, EXEC).await.unwrap();
        assert_eq!(third.decision.outcome, Outcome::Rework);

        let rows = w.engine.store().list(DocKind::Decision, &About::Execution(EXEC.into())).await.unwrap();
        assert_eq!(rows.len(), 3);
        for row in rows {
            let d: GateDecision = row.decode().unwrap();
            let again = w.engine.gate_replay(&w.ops, d.evaluation_key.as_ref().unwrap()).await.unwrap();
            assert_eq!(again.bytes, row.body);
            assert_eq!(again.decision.canonical_bytes().unwrap(), row.body.as_bytes());
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_authenticate_only_their_principal_and_only_operators_manage_principals() {
    on_both(|store| async move {
        let w = world(store).await;
        assert_eq!(
            code(&w.engine.authenticate("vdt_forged").await.unwrap_err()),
            "unauthenticated"
        );
        assert_eq!(
            code(&w.engine.authenticate("").await.unwrap_err()),
            "unauthenticated"
        );
        let role = serde_json::from_value(json!("operator")).unwrap();
        let e = w
            .engine
            .add_principal(&w.coder, "mallory", role)
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        assert_eq!(
            code(&w.engine.init("ops", StoreClock::Manual).await.unwrap_err()),
            "conflict"
        );
        let e = w
            .engine
            .revoke(&w.rev, "g-rev", "self-service")
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
        // An expired grant is no grant.
        w.engine
            .store()
            .set_manual_time(&ts("2027-06-01T00:00:00Z"))
            .await
            .unwrap();
        let e = w
            .engine
            .put_subject(&w.coder, &subject(1, "late"))
            .await
            .unwrap_err();
        assert_eq!(code(&e), "permission_denied");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_on_time_sensitive_evidence_stops_applying_when_it_expires() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = w
            .engine
            .put_subject(&w.coder, &subject(1, "live"))
            .await
            .unwrap();
        let mut ev = evidence(&d, "pass", "ci", "runner");
        ev["freshness"] = json!({"kind": "time", "max_age_s": 600});
        w.engine
            .add_evidence(&w.ci, std::slice::from_ref(&ev))
            .await
            .unwrap();
        let req = request(&w, json!({})).await;
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-a")
            .await
            .unwrap();
        let r = result("rev", "run-a", &d, 1, ev["id"].as_str().unwrap());
        w.engine.submit_result(&w.rev, &r).await.unwrap();
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome, Outcome::Pass);
        assert_eq!(
            g.decision
                .valid_until
                .as_ref()
                .map(|t| t.as_str().to_owned()),
            Some("2026-11-30T12:09:00Z".into())
        );
        let store = w.engine.store();
        store
            .set_manual_time(&ts("2026-11-30T12:08:59Z"))
            .await
            .unwrap();
        assert!(
            w.engine
                .status(&w.ops, EXEC)
                .await
                .unwrap()
                .applicable
                .is_some()
        );
        store
            .set_manual_time(&ts("2026-11-30T12:09:00Z"))
            .await
            .unwrap();
        let later = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(later.applicable.is_none());
        assert_eq!(
            later.latest.unwrap().not_applicable,
            vec![NotApplicable::Expired]
        );
    })
    .await;
}
