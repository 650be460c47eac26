//! The lifecycle's hostile cases (docs/hostile-cases.md, "Lifecycle"): a late hard failure,
//! cancellation, re-bound approvals and incomplete results, each tried against the engine on
//! SQLite and on PostgreSQL with one test body.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use verdict_core::contracts::{HumanVerdict, Outcome, Role};
use verdict_engine::{NotApplicable, Reviewed};
use verdict_store::{About, DocKind, RunStatus};

async fn denials(w: &World) -> usize {
    w.engine.store().denials(0, 10_000).await.unwrap().len()
}

async fn audit_seq(w: &World) -> u64 {
    w.engine
        .store()
        .audit_head()
        .await
        .unwrap()
        .map_or(0, |h| h.seq)
}

/// How many decisions of the execution apply at `at`; never more than one.
async fn applying(w: &World) -> Vec<Outcome> {
    w.engine
        .history(&w.ops, EXEC)
        .await
        .unwrap()
        .decisions
        .iter()
        .filter(|d| d.applies())
        .map(|d| d.decision.outcome)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_hard_failure_stops_a_pass_from_applying() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = passed(&w, 1, "change A", "run-a").await;
        assert_eq!(applying(&w).await, vec![Outcome::Pass]);
        // A runner records a hard failure of the required check after the pass.
        let mut fail = evidence(&d, "fail", "ci", "runner");
        fail["id"] = json!("ev-late-fail");
        w.engine.add_evidence(&w.ci, &[fail]).await.unwrap();
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none(), "{:?}", status.applicable);
        let latest = status.latest.unwrap();
        assert_eq!(latest.decision.outcome, Outcome::Pass);
        assert_eq!(latest.not_applicable, vec![NotApplicable::EvidenceSetMoved]);
        assert!(applying(&w).await.is_empty());
        // The Gate runs again: the rework applies, the pass stays history.
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome, Outcome::Rework);
        assert_eq!(applying(&w).await, vec![Outcome::Rework]);
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        assert_eq!(history.decisions.len(), 2);
        assert_eq!(
            history.decisions[0].not_applicable,
            vec![NotApplicable::EvidenceSetMoved]
        );
        // Asking the Gate again at once changes nothing: one decision applies.
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(applying(&w).await, vec![Outcome::Rework]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_later_item_about_the_subject_moves_the_evidence_set() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = passed(&w, 1, "change A", "run-a").await;
        // A second verifier's counted result, passing too.
        let req = request(&w, json!({})).await;
        w.engine
            .admit(&w.ops, &req, "rev2", "reviewer", "run-b")
            .await
            .unwrap();
        let ev = evidence(&d, "pass", "ci", "runner")["id"].clone();
        let r = result("rev2", "run-b", &d, 1, ev.as_str().unwrap());
        assert!(w.engine.submit_result(&w.rev2, &r).await.unwrap().counted);
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none());
        assert_eq!(
            status.latest.unwrap().not_applicable,
            vec![NotApplicable::EvidenceSetMoved]
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome, Outcome::Pass);
        assert_eq!(applying(&w).await, vec![Outcome::Pass]);
        // A human decision about the subject moves it too, even an approval (stored as the
        // person's own row: with nothing needing a person, `decide` refuses to approve).
        approval_as_stored(&w, "read the diff").await;
        assert!(applying(&w).await.is_empty());
        // Check evidence that passes moves it as well: the Gate never read it.
        let mut more = evidence(&d, "pass", "ci", "runner");
        more["id"] = json!("ev-second-pass");
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(applying(&w).await, vec![Outcome::Pass]);
        w.engine.add_evidence(&w.ci, &[more]).await.unwrap();
        assert!(applying(&w).await.is_empty());
        // And a finding stored on its own, a new version of one about the subject, by the
        // verifier whose run was admitted on it.
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(applying(&w).await, vec![Outcome::Pass]);
        let finding = json!({
            "id": "f-late", "version": 1, "criterion": "tests-pass", "type": "bug",
            "severity": "blocker", "scope": "change", "subject_digest": d.as_str(),
            "evidence_refs": [ev], "method": "review"
        });
        w.engine
            .store()
            .put(&w.rev.actor(), DocKind::Finding, &finding)
            .await
            .unwrap();
        assert!(applying(&w).await.is_empty());
        assert_eq!(
            latest_not_applicable(&w).await,
            vec![NotApplicable::EvidenceSetMoved]
        );
        // Run again, the Gate reads the stored blocker as one no counted result addressed.
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(
            g.decision.outcome,
            Outcome::Blocked,
            "{:?}",
            g.decision.reasons
        );
        assert!(
            g.decision
                .reasons
                .iter()
                .any(|r| r.code.as_str() == "prior_blocker_unaddressed"),
            "{:?}",
            g.decision.reasons
        );
        assert!(
            g.decision
                .unresolved_prior_blockers
                .iter()
                .any(|f| f.id.as_str() == "f-late")
        );
    })
    .await;
}

/// A verifier that finishes after its subject was replaced within the same generation is kept
/// as history and publishes no pass: its result is about the old subject, which is no longer
/// the execution's current one, so it never counts and the Gate never reads it for the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_finishing_after_its_subject_was_replaced_in_the_same_generation_never_counts() {
    on_both(|store| async move {
        let w = world(store).await;
        let (a, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        let b = w
            .engine
            .put_subject(&w.coder, &subject(1, "change B"))
            .await
            .unwrap();
        assert_ne!(a, b);
        // Kept as history: stored, never counted, and said why.
        let sub = w
            .engine
            .submit_result(&w.rev, &result("rev", "run-a", &a, 1, &ev))
            .await
            .unwrap();
        assert!(!sub.counted, "{sub:?}");
        assert!(
            sub.why_not
                .as_deref()
                .is_some_and(|why| why.contains("no longer the execution's current one")),
            "{sub:?}"
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(
            g.decision.outcome,
            Outcome::Pass,
            "{:?}",
            g.decision.reasons
        );
        assert_eq!(g.decision.subject_digest.as_ref(), Some(&b));
        assert!(applying(&w).await.iter().all(|o| *o != Outcome::Pass));
        // Whatever the store kept of it is about A, never about B.
        assert!(
            w.engine
                .store()
                .list(DocKind::Verification, &About::Subject(b.clone()))
                .await
                .unwrap()
                .is_empty()
        );
        let kept = w
            .engine
            .store()
            .list(DocKind::Verification, &About::Subject(a.clone()))
            .await
            .unwrap();
        assert_eq!(kept.len(), 1);
        assert_ne!(kept[0].counted, Some(true), "{kept:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_evaluations_of_one_evidence_set_never_both_apply() {
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
        assert_eq!(
            w.engine
                .gate_run(&w.ops, EXEC)
                .await
                .unwrap()
                .decision
                .outcome,
            Outcome::Pass
        );
        // Later the evidence is stale: same items, another evaluation key, a blocked decision.
        let later = ts("2026-11-30T12:30:00Z");
        let store = w.engine.store();
        store.set_manual_time(&later).await.unwrap();
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome, Outcome::Blocked);
        // Read at a time when the pass has not expired, only the latest evaluation applies.
        store.set_manual_time(&now()).await.unwrap();
        assert_eq!(applying(&w).await, vec![Outcome::Blocked]);
        store.set_manual_time(&later).await.unwrap();
        assert_eq!(applying(&w).await, vec![Outcome::Blocked]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_operator_or_its_own_producer_cancels_an_execution() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-a").await;
        let role = serde_json::from_value(json!("producer")).unwrap();
        let t = w
            .engine
            .add_principal(&w.ops, "other-coder", role)
            .await
            .unwrap();
        let other = w.engine.authenticate(&t).await.unwrap();
        w.engine
            .grant(
                &w.ops,
                "g-other",
                "other-coder",
                verdict_store::ScopeKind::Execution,
                EXEC,
                verdict_store::Access::Write,
                &ts("2027-01-01T00:00:00Z"),
            )
            .await
            .unwrap();
        for who in [&w.rev, &w.alice, &w.ci, &other] {
            let (before, seq) = (denials(&w).await, audit_seq(&w).await);
            let e = w
                .engine
                .cancel_execution(who, EXEC, "mine now")
                .await
                .unwrap_err();
            assert_eq!(e.code(), "permission_denied", "{} {e}", who.name());
            // A refused cancellation writes its denial and nothing else.
            assert_eq!(denials(&w).await, before + 1);
            assert_eq!(audit_seq(&w).await, seq + 1);
        }
        // No reason, no cancellation, and nothing written.
        let seq = audit_seq(&w).await;
        let e = w
            .engine
            .cancel_execution(&w.coder, EXEC, "  ")
            .await
            .unwrap_err();
        assert_eq!(e.code(), "invalid_input");
        assert_eq!(audit_seq(&w).await, seq);
        assert!(
            w.engine
                .execution_cancellation(&w.ops, EXEC)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(applying(&w).await, vec![Outcome::Pass]);

        let c = w
            .engine
            .cancel_execution(&w.coder, EXEC, "the task was withdrawn")
            .await
            .unwrap();
        assert_eq!(c.by.role, Role::Producer);
        let again = w
            .engine
            .cancel_execution(&w.ops, EXEC, "twice")
            .await
            .unwrap_err();
        assert_eq!(again.code(), "conflict");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_execution_has_no_decision_and_takes_nothing_new() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        let open_req = request(&w, json!({})).await;
        w.engine
            .submit_result(&w.rev, &result("rev", "run-a", &d, 1, &ev))
            .await
            .unwrap();
        w.engine
            .admit(&w.ops, &open_req, "rev2", "reviewer", "run-open")
            .await
            .unwrap();
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        let pass = reviewed(&w).await;
        w.engine
            .cancel_execution(&w.ops, EXEC, "superseded by ex-2")
            .await
            .unwrap();

        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none());
        assert_eq!(status.cancelled.unwrap().reason, "superseded by ex-2");
        assert_eq!(
            status.latest.unwrap().not_applicable,
            vec![NotApplicable::ExecutionCancelled]
        );
        // Its open run was cancelled with it.
        let open = w.engine.store().run("run-open").await.unwrap().unwrap();
        assert_eq!(open.status(), Some(RunStatus::Cancelled));

        let conflict = |e: verdict_engine::EngineError| assert_eq!(e.code(), "conflict", "{e}");
        conflict(w.engine.gate_run(&w.ops, EXEC).await.unwrap_err());
        conflict(
            w.engine
                .create_request(&w.coder, EXEC, &json!({"max_runs": 3}))
                .await
                .unwrap_err(),
        );
        conflict(
            w.engine
                .admit(&w.ops, &open_req, "rev2", "reviewer", "run-new")
                .await
                .unwrap_err(),
        );
        conflict(
            w.engine
                .put_subject(&w.coder, &subject(2, "change A"))
                .await
                .unwrap_err(),
        );
        conflict(
            w.engine
                .decide(&w.alice, EXEC, HumanVerdict::Approve, "fine", &pass)
                .await
                .unwrap_err(),
        );
        assert!(w.engine.store().run("run-new").await.unwrap().is_none());
        // The cancelled run's late result is kept as history, never counted.
        let late = w
            .engine
            .submit_result(&w.rev2, &result("rev2", "run-open", &d, 1, &ev))
            .await
            .unwrap();
        assert!(!late.counted);
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        assert!(history.decisions.iter().all(|d| !d.applies()));
        let run = history
            .runs
            .iter()
            .find(|r| r.run_id == "run-open")
            .unwrap();
        assert_eq!(run.status, "cancelled");
        assert_eq!(run.counted, Some(false));
        assert!(
            run.detail
                .as_deref()
                .unwrap()
                .contains("superseded by ex-2"),
            "{run:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_runs_late_result_is_history_only() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        // Not the verifier, not the producer: operators cancel runs. Each try is a denial only.
        for who in [&w.rev, &w.coder, &w.alice] {
            let seq = audit_seq(&w).await;
            let e = w.engine.cancel_run(who, "run-a", "stop").await.unwrap_err();
            assert_eq!(e.code(), "permission_denied", "{}", who.name());
            assert_eq!(audit_seq(&w).await, seq + 1);
        }
        w.engine
            .cancel_run(&w.ops, "run-a", "the provider is down")
            .await
            .unwrap();
        let late = w
            .engine
            .submit_result(&w.rev, &result("rev", "run-a", &d, 1, &ev))
            .await
            .unwrap();
        assert!(!late.counted);
        assert!(late.why_not.unwrap().contains("cancelled"));
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(g.decision.outcome, Outcome::Pass);
        assert!(
            g.decision
                .reasons
                .iter()
                .any(|r| r.code.as_str() == "verifier_missing"),
            "{:?}",
            g.decision.reasons
        );
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        let run = &history.runs[0];
        assert_eq!(
            (run.status.as_str(), run.counted),
            ("cancelled", Some(false))
        );
        assert!(
            run.detail
                .as_deref()
                .unwrap()
                .contains("the provider is down")
        );
        // An ended run cannot be cancelled (or un-cancelled).
        let e = w
            .engine
            .cancel_run(&w.ops, "run-a", "again")
            .await
            .unwrap_err();
        assert_eq!(e.code(), "conflict");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_names_what_was_reviewed_and_is_never_rebound() {
    on_both(|store| async move {
        let w = world(store).await;
        let a = w
            .engine
            .put_subject(&w.coder, &subject(1, "change A"))
            .await
            .unwrap();
        // The person reviews A under policy 1, as status shows them.
        let seen = reviewed(&w).await;
        assert_eq!(seen.subject_digest, a);
        // Meanwhile the producer puts B.
        let b = w
            .engine
            .put_subject(&w.coder, &subject(1, "change B"))
            .await
            .unwrap();
        let seq = audit_seq(&w).await;
        let e = w
            .engine
            .decide(&w.alice, EXEC, HumanVerdict::Approve, "A is fine", &seen)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "conflict", "{e}");
        assert_eq!(audit_seq(&w).await, seq, "nothing recorded");
        // Reviewing B, but under a policy that has since moved, is refused too. (The new
        // policy asks for a person, so an approval under it has something to clear.)
        let on_b = Reviewed {
            subject_digest: b.clone(),
            policy_digest: seen.policy_digest.clone(),
            decision_key: None,
        };
        w.engine
            .set_policy(&w.ops, &policy_needing_a_person(2))
            .await
            .unwrap();
        let e = w
            .engine
            .decide(&w.alice, EXEC, HumanVerdict::Approve, "B is fine", &on_b)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "conflict", "{e}");
        for s in [&a, &b] {
            assert!(
                w.engine
                    .store()
                    .list(DocKind::HumanDecision, &About::Subject(s.clone()))
                    .await
                    .unwrap()
                    .is_empty()
            );
        }
        // Naming what is current, it is recorded, bound to exactly that.
        let now_seen = reviewed(&w).await;
        let d = w
            .engine
            .decide(
                &w.alice,
                EXEC,
                HumanVerdict::Approve,
                "B is fine",
                &now_seen,
            )
            .await
            .unwrap();
        let stored: Value = w
            .engine
            .store()
            .get(DocKind::HumanDecision, &d)
            .await
            .unwrap()
            .unwrap()
            .value()
            .unwrap();
        assert_eq!(stored["subject_digest"], json!(b.as_str()));
        assert_eq!(
            stored["policy_digest"],
            json!(now_seen.policy_digest.as_str())
        );
        assert_ne!(now_seen.policy_digest, seen.policy_digest);
    })
    .await;
}

/// A subject of [`EXEC`] with three criteria; the check bears on the first.
fn three_criteria(diff: &str) -> Value {
    let mut s = subject(1, diff);
    s["criteria"]["items"] = json!([
        {"id": "tests-pass", "text": "unit tests pass"},
        {"id": "docs-updated", "text": "the docs say what changed"},
        {"id": "no-new-deps", "text": "no new dependencies"}
    ]);
    s
}

/// A completed reviewer result answering `ids`, each passed on the given evidence.
fn rows(run: &str, d: &verdict_core::digest::Digest, ev: &str, ids: &[&str]) -> Value {
    let mut r = result("rev", run, d, 1, ev);
    r["id"] = json!(format!("vr-{run}-{}", ids.len()));
    r["criteria"] = Value::Array(
        ids.iter()
            .map(|id| json!({"id": id, "status": "passed", "method": "review", "evidence_refs": [ev]}))
            .collect(),
    );
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incomplete_result_is_refused_and_does_not_brick_the_subject() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = w
            .engine
            .put_subject(&w.coder, &three_criteria("change A"))
            .await
            .unwrap();
        let ev = evidence(&d, "pass", "ci", "runner");
        let ev_id = ev["id"].as_str().unwrap().to_owned();
        w.engine.add_evidence(&w.ci, &[ev]).await.unwrap();
        let req = request(&w, json!({})).await;
        let tries: [(&str, Vec<&str>, &str); 5] = [
            (
                "run-1",
                vec!["tests-pass"],
                "no row for docs-updated, no-new-deps",
            ),
            // Every criterion answered, and one the subject does not have besides: a look-alike
            // of one of its ids, and another id outright.
            (
                "run-x1",
                vec!["tests-pass", "docs-updated", "no-new-deps", "tests-passes"],
                "criterion tests-passes is not in the subject at /criteria/3/id",
            ),
            (
                "run-x2",
                vec!["tests-pass", "docs-updated", "no-new-deps", "security"],
                "criterion security is not in the subject at /criteria/3/id",
            ),
            (
                "run-2",
                vec!["tests-pass", "docs-updated", "no-new-deps", "tests-pass"],
                "answered twice",
            ),
            ("run-3", vec![], "no row for"),
        ];
        for (run, ids, why) in &tries {
            w.engine
                .admit(&w.ops, &req, "rev", "reviewer", run)
                .await
                .unwrap();
            let doc = rows(run, &d, &ev_id, ids);
            let e = w.engine.submit_result(&w.rev, &doc).await.unwrap_err();
            assert_eq!(e.code(), "invalid_input");
            assert!(e.to_string().contains(why), "{e}");
            // Stored only as the run's unavailable outcome, never as a result.
            let r = w.engine.store().run(run).await.unwrap().unwrap();
            assert_eq!(r.status(), Some(RunStatus::Unavailable));
            assert_eq!(
                r.events.last().unwrap().reason,
                Some(verdict_core::contracts::UnavailableReason::InvalidOutput)
            );
            // The same document again is refused: the run has its outcome.
            let again = w.engine.submit_result(&w.rev, &doc).await.unwrap_err();
            assert_eq!(again.code(), "conflict");
        }
        // A result for another subject than its run's is refused and ends the run too.
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-4")
            .await
            .unwrap();
        let mut foreign = rows(
            "run-4",
            &d,
            &ev_id,
            &["tests-pass", "docs-updated", "no-new-deps"],
        );
        foreign["generation"] = json!(2);
        let e = w.engine.submit_result(&w.rev, &foreign).await.unwrap_err();
        assert!(e.to_string().contains("/generation"), "{e}");
        // What is stored of each refused result is its run's outcome: an `unavailable` result
        // (invalid_output) with no rows, under the refused document's id.
        let stored: Vec<verdict_core::contracts::VerificationResult> = w
            .engine
            .store()
            .list(DocKind::Verification, &About::Subject(d.clone()))
            .await
            .unwrap()
            .iter()
            .map(|row| row.decode().unwrap())
            .collect();
        assert_eq!(stored.len(), tries.len() + 1, "{stored:?}");
        assert!(
            stored.iter().all(|r| r.status
                == verdict_core::contracts::VerificationStatus::Unavailable
                && r.unavailable_reason
                    == Some(verdict_core::contracts::UnavailableReason::InvalidOutput)
                && r.criteria.is_empty()
                && r.findings.is_empty()),
            "{stored:?}"
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        let codes: Vec<&str> = g.decision.reasons.iter().map(|r| r.code.as_str()).collect();
        assert!(!codes.contains(&"criterion_row_missing"), "{codes:?}");
        // The class's only outcomes are unavailable ones: the Gate names it unavailable, with
        // the cause, not missing.
        assert!(codes.contains(&"verifier_unavailable"), "{codes:?}");
        assert!(!codes.contains(&"verifier_missing"), "{codes:?}");
        assert!(
            g.decision
                .reasons
                .iter()
                .any(|r| r.code.as_str() == "verifier_unavailable"
                    && r.detail.contains("invalid_output")),
            "{:?}",
            g.decision.reasons
        );
        assert_ne!(g.decision.outcome, Outcome::Pass);
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        let first = history.runs.iter().find(|r| r.run_id == "run-1").unwrap();
        assert_eq!(first.status, "unavailable");
        assert!(
            first.detail.as_deref().unwrap().contains("invalid_output"),
            "{first:?}"
        );

        // A complete result from a new run clears it, and the Gate can pass.
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-5")
            .await
            .unwrap();
        let done = rows(
            "run-5",
            &d,
            &ev_id,
            &["tests-pass", "docs-updated", "no-new-deps"],
        );
        assert!(w.engine.submit_result(&w.rev, &done).await.unwrap().counted);
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(
            g.decision.outcome,
            Outcome::Pass,
            "{:?}",
            g.decision.reasons
        );
        assert_eq!(applying(&w).await, vec![Outcome::Pass]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_forging_a_cancellation_record_cancels_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = passed(&w, 1, "change A", "run-a").await;
        // The requests table takes a producer's documents; one shaped like the engine's
        // cancellation record is not the engine's and is ignored.
        let forged = json!({
            "schema": verdict_engine::CANCELLATION_SCHEMA,
            "cancelled": {"kind": "execution", "id": EXEC},
            "subject_digest": d.as_str(),
            "by": {"principal": "ops", "role": "operator"},
            "reason": "forged",
            "at": now().as_str(),
        });
        w.engine
            .store()
            .put(&w.coder.actor(), DocKind::Request, &forged)
            .await
            .unwrap();
        assert!(
            w.engine
                .execution_cancellation(&w.ops, EXEC)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(applying(&w).await, vec![Outcome::Pass]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_written_around_the_engine_counts_only_when_whole_and_its_runs_outcome() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = w
            .engine
            .put_subject(&w.coder, &three_criteria("change A"))
            .await
            .unwrap();
        let ev = evidence(&d, "pass", "ci", "runner");
        let ev_id = ev["id"].as_str().unwrap().to_owned();
        w.engine.add_evidence(&w.ci, &[ev]).await.unwrap();
        let req = request(&w, json!({})).await;
        let all = ["tests-pass", "docs-updated", "no-new-deps"];
        for run in ["run-1", "run-2", "run-3"] {
            w.engine
                .admit(&w.ops, &req, "rev", "reviewer", run)
                .await
                .unwrap();
        }
        let s = w.engine.store();
        // The verifier writes an incomplete result and its run's outcome straight to the store.
        s.put(
            &w.rev.actor(),
            DocKind::Verification,
            &rows("run-1", &d, &ev_id, &["tests-pass"]),
        )
        .await
        .unwrap();
        s.record_run_status(&w.rev.actor(), "run-1", RunStatus::Completed, None)
            .await
            .unwrap();
        // A run whose result the engine refused gets a whole result behind its back.
        let e = w
            .engine
            .submit_result(&w.rev, &rows("run-2", &d, &ev_id, &["tests-pass"]))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "invalid_input");
        s.put(
            &w.rev.actor(),
            DocKind::Verification,
            &rows("run-2", &d, &ev_id, &all),
        )
        .await
        .unwrap();
        // A whole result with no recorded outcome for its run.
        s.put(
            &w.rev.actor(),
            DocKind::Verification,
            &rows("run-3", &d, &ev_id, &all),
        )
        .await
        .unwrap();
        let collected = w.engine.collect(&w.ops, EXEC).await.unwrap();
        // None of the results written around the engine counts; what counts of run-2 is its
        // outcome, the `unavailable` result stored in place of the refused one.
        let counted: Vec<verdict_core::contracts::VerificationResult> = collected
            .verifications
            .iter()
            .map(|row| row.decode().unwrap())
            .collect();
        assert_eq!(counted.len(), 1, "{counted:?}");
        assert_eq!(counted[0].verifier.run.as_str(), "run-2");
        assert_eq!(
            counted[0].status,
            verdict_core::contracts::VerificationStatus::Unavailable
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(g.decision.outcome, Outcome::Pass);
        assert!(
            !g.decision
                .reasons
                .iter()
                .any(|r| r.code.as_str() == "criterion_row_missing"),
            "{:?}",
            g.decision.reasons
        );
        // The engine's own path still counts a whole result.
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-4")
            .await
            .unwrap();
        let ok = w
            .engine
            .submit_result(&w.rev, &rows("run-4", &d, &ev_id, &all))
            .await
            .unwrap();
        assert!(ok.counted);
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(
            g.decision.outcome,
            Outcome::Pass,
            "{:?}",
            g.decision.reasons
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_result_for_a_run_never_counts() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = w
            .engine
            .put_subject(&w.coder, &three_criteria("change A"))
            .await
            .unwrap();
        let ev = evidence(&d, "pass", "ci", "runner");
        let ev_id = ev["id"].as_str().unwrap().to_owned();
        w.engine.add_evidence(&w.ci, &[ev]).await.unwrap();
        let req = request(&w, json!({})).await;
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap();
        let all = ["tests-pass", "docs-updated", "no-new-deps"];
        // The engine takes a whole result that fails one criterion...
        let mut failing = rows("run-1", &d, &ev_id, &all);
        failing["criteria"][1]["status"] = json!("failed");
        let sub = w.engine.submit_result(&w.rev, &failing).await.unwrap();
        assert!(sub.counted);
        // ...and the verifier then stores an all-passed one for the same run behind its back.
        let mut second = rows("run-1", &d, &ev_id, &all);
        second["id"] = json!("vr-run-1-again");
        w.engine
            .store()
            .put(&w.rev.actor(), DocKind::Verification, &second)
            .await
            .unwrap();
        let collected = w.engine.collect(&w.ops, EXEC).await.unwrap();
        assert_eq!(
            collected.verifications.len(),
            1,
            "only the run's first result counts"
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(
            g.decision.outcome,
            Outcome::Pass,
            "{:?}",
            g.decision.reasons
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_run_that_read_before_a_late_failure_never_applies() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        w.engine
            .submit_result(&w.rev, &result("rev", "run-a", &d, 1, &ev))
            .await
            .unwrap();
        // A slow gate run reads the items...
        let read = w.engine.collect(&w.ops, EXEC).await.unwrap();
        // ...a hard failure lands meanwhile...
        let mut fail = evidence(&d, "fail", "ci", "runner");
        fail["id"] = json!("ev-meanwhile");
        w.engine.add_evidence(&w.ci, &[fail]).await.unwrap();
        // ...and its pass is stored after it, as the latest evaluation of the subject.
        let decision = verdict_core::gate::evaluate_value(&read.bundle(&now()).unwrap());
        assert_eq!(decision.outcome, Outcome::Pass);
        let digests = |rows: &[verdict_store::Stored]| {
            let mut v: Vec<_> = rows.iter().map(|r| r.digest.clone()).collect();
            v.sort_by(|a, b| a.as_str().cmp(b.as_str()));
            v
        };
        let record = verdict_store::EvaluationRecord {
            schema: verdict_store::EVALUATION_SCHEMA.to_owned(),
            evaluation_key: decision.evaluation_key.clone().unwrap(),
            subject_digest: d.clone(),
            policy_digest: read.policy_digest.clone(),
            now: now(),
            evidence: digests(&read.evidence),
            verifications: digests(&read.verifications),
            human_decisions: vec![],
            prior_findings: vec![],
        };
        w.engine
            .store()
            .put_batch(
                &verdict_store::Actor::gate("ops"),
                &[
                    (DocKind::Evaluation, serde_json::to_value(&record).unwrap()),
                    (DocKind::Decision, serde_json::to_value(&decision).unwrap()),
                ],
            )
            .await
            .unwrap();
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none(), "{:?}", status.applicable);
        assert_eq!(
            status.latest.unwrap().not_applicable,
            vec![NotApplicable::EvidenceSetMoved]
        );
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome, Outcome::Rework);
        assert_eq!(applying(&w).await, vec![Outcome::Rework]);
    })
    .await;
}

/// A verifier submits its result while an operator cancels its run. Whichever lands first, the
/// answer says what was stored: an answer is a result stored (never counted when its run ended
/// cancelled), an error a result not stored. Tried on twelve fresh runs, so that the
/// cancellation lands before, after and between the result and its run's outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_racing_its_runs_cancellation_says_what_was_stored() {
    on_both(|store| async move {
        let w = world(store).await;
        for generation in 1..=12_u64 {
            let run = format!("run-race-{generation}");
            let (d, ev, _) = prepared(&w, generation, &format!("change {generation}"), &run).await;
            let doc = result("rev", &run, &d, generation, &ev);
            let digest =
                verdict_core::digest::digest(verdict_core::digest::DigestKind::Verification, &doc);
            let (submitted, cancelled) = tokio::join!(
                w.engine.submit_result(&w.rev, &doc),
                w.engine.cancel_run(&w.ops, &run, "raced")
            );
            let stored = w
                .engine
                .store()
                .get(DocKind::Verification, &digest)
                .await
                .unwrap();
            let ended = w.engine.store().run(&run).await.unwrap().unwrap().status();
            match submitted {
                Ok(s) => {
                    assert!(stored.is_some(), "answered as stored, but nothing is");
                    assert_eq!(s.digest, digest);
                    if ended == Some(RunStatus::Cancelled) {
                        assert!(!s.counted, "a cancelled run's result counted");
                        assert!(s.why_not.unwrap().contains("cancelled"));
                    }
                }
                Err(e) => {
                    assert!(
                        stored.is_none(),
                        "an error ({e}) for a result that is stored"
                    );
                }
            }
            // A cancellation answered as done ended the run.
            if cancelled.is_ok() {
                assert_eq!(ended, Some(RunStatus::Cancelled));
            }
        }
    })
    .await;
}

/// The human decision stored under `digest`, as its body reads.
async fn human_decision(w: &World, digest: &verdict_core::digest::Digest) -> Value {
    w.engine
        .store()
        .get(DocKind::HumanDecision, digest)
        .await
        .unwrap()
        .unwrap()
        .value()
        .unwrap()
}

/// A policy whose risk table asks a person to review low-risk work.
fn policy_needing_a_person(revision: u64) -> Value {
    let mut p = policy(revision);
    p["risk"] = json!({"low": {"human": true}});
    p
}

/// A reviewer's completed result answering `tests-pass` with `status` on the given evidence.
fn answering(run: &str, d: &verdict_core::digest::Digest, ev: &str, status: &str) -> Value {
    let mut r = result(if run == "run-1" { "rev" } else { "rev2" }, run, d, 1, ev);
    r["criteria"][0]["status"] = json!(status);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_clears_only_what_the_person_saw() {
    on_both(|store| async move {
        let w = world(store).await;
        w.engine
            .set_policy(&w.ops, &policy_needing_a_person(2))
            .await
            .unwrap();
        let (d, ev) = subject_with_evidence(&w, 1, "change A", "pass").await;
        let req = request(&w, json!({"max_runs": 2})).await;
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap();
        let sub = w
            .engine
            .submit_result(&w.rev, &answering("run-1", &d, &ev, "passed"))
            .await
            .unwrap();
        assert!(sub.counted, "{sub:?}");
        let first = w.engine.gate_run(&w.ops, EXEC).await.unwrap().decision;
        assert_eq!(first.outcome, Outcome::HumanRequired, "{first:?}");
        let first_key = first.evaluation_key.clone().unwrap();

        // The person approves the decision it looked at; the approval names the risk review.
        let mut seen = reviewed(&w).await;
        seen.decision_key = Some(first_key.clone());
        let hd = w
            .engine
            .decide(
                &w.alice,
                EXEC,
                HumanVerdict::Approve,
                "risk reviewed",
                &seen,
            )
            .await
            .unwrap();
        let stored = human_decision(&w, &hd).await;
        assert_eq!(stored["clears"], json!([{"code": "human_review_required"}]));
        let approved = w.engine.gate_run(&w.ops, EXEC).await.unwrap().decision;
        assert_eq!(approved.outcome, Outcome::Pass, "{approved:?}");

        // A second reviewer answers `inconclusive` afterwards: no person saw that.
        w.engine
            .admit(&w.ops, &req, "rev2", "reviewer", "run-2")
            .await
            .unwrap();
        let sub = w
            .engine
            .submit_result(&w.rev2, &answering("run-2", &d, &ev, "inconclusive"))
            .await
            .unwrap();
        assert!(sub.counted, "{sub:?}");
        let later = w.engine.gate_run(&w.ops, EXEC).await.unwrap().decision;
        assert_eq!(later.outcome, Outcome::HumanRequired, "{later:?}");
        assert!(
            later.reasons.iter().any(|r| r.code
                == verdict_core::contracts::ReasonCode::CriterionInconclusive
                && r.criterion.as_ref().map(|c| c.as_str()) == Some("tests-pass")),
            "{later:?}"
        );
        let later_key = later.evaluation_key.clone().unwrap();

        // An approval naming the decision seen before is refused, never bound to what is now,
        // and writes nothing (no denial either: the person may see the execution).
        let seq = audit_seq(&w).await;
        let denied = denials(&w).await;
        for verdict in [HumanVerdict::Approve, HumanVerdict::Reject] {
            let e = w
                .engine
                .decide(&w.alice, EXEC, verdict, "looked again", &seen)
                .await
                .unwrap_err();
            assert_eq!(e.code(), "conflict", "{e}");
            let text = e.to_string();
            assert!(
                text.contains(first_key.as_str()) && text.contains(later_key.as_str()),
                "{text}"
            );
        }
        assert_eq!(audit_seq(&w).await, seq, "nothing recorded");
        assert_eq!(denials(&w).await, denied);
        let decisions = w
            .engine
            .store()
            .list(DocKind::HumanDecision, &About::Subject(d.clone()))
            .await
            .unwrap();
        assert_eq!(decisions.len(), 1);

        // Naming the current decision, the second approval clears what it shows.
        seen.decision_key = Some(later_key);
        let hd2 = w
            .engine
            .decide(
                &w.alice,
                EXEC,
                HumanVerdict::Approve,
                "inconclusive is fine",
                &seen,
            )
            .await
            .unwrap();
        let stored = human_decision(&w, &hd2).await;
        assert_eq!(
            stored["clears"],
            json!([{"code": "criterion_inconclusive", "criterion": "tests-pass"}])
        );
        let last = w.engine.gate_run(&w.ops, EXEC).await.unwrap().decision;
        assert_eq!(last.outcome, Outcome::Pass, "{last:?}");

        // Nothing needs a person now: another approval is refused and writes nothing; without
        // a decision key, an approval still clears what is current (refused here for the same
        // reason) and a rejection is recorded.
        let seq = audit_seq(&w).await;
        let mut now_seen = reviewed(&w).await;
        let e = w
            .engine
            .decide(&w.alice, EXEC, HumanVerdict::Approve, "again", &now_seen)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "conflict", "{e}");
        assert!(e.to_string().contains("nothing needs a person"), "{e}");
        now_seen.decision_key = last.evaluation_key.clone();
        let e = w
            .engine
            .decide(&w.alice, EXEC, HumanVerdict::Approve, "again", &now_seen)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "conflict", "{e}");
        assert_eq!(audit_seq(&w).await, seq, "nothing recorded");
        let rejected = w
            .engine
            .decide(
                &w.alice,
                EXEC,
                HumanVerdict::Reject,
                "on second thought",
                &now_seen,
            )
            .await
            .unwrap();
        let stored = human_decision(&w, &rejected).await;
        assert!(stored.get("clears").is_none(), "{stored}");
    })
    .await;
}

/// A principal refused without end records at most `DENIALS_PER_MINUTE` denials a minute: each
/// refusal past the bound is answered exactly as before (same code, same message), but appends
/// nothing, so nobody can grow the chain without end by being refused. Another principal's
/// refusals are recorded as ever, and the chain verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_past_a_principals_bound_in_a_minute_are_answered_and_append_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        let bound = usize::try_from(verdict_store::DENIALS_PER_MINUTE).unwrap();
        let first = denials(&w).await;
        let mut messages = Vec::new();
        for n in 0..bound + 5 {
            let e = w
                .engine
                .add_principal(&w.coder, &format!("minted-{n}"), Role::Operator)
                .await
                .unwrap_err();
            assert_eq!(e.code(), "permission_denied", "{n}: {e}");
            messages.push(e.to_string());
        }
        // Every answer is the same refusal, recorded or not.
        assert!(messages.iter().all(|m| m == &messages[0]), "{messages:#?}");
        assert_eq!(denials(&w).await, first + bound);
        let head = audit_seq(&w).await;
        let e = w
            .engine
            .add_principal(&w.coder, "minted-again", Role::Operator)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        assert_eq!(audit_seq(&w).await, head);
        // Another principal is not held by the coder's bound.
        let e = w
            .engine
            .add_principal(&w.rev, "minted-by-rev", Role::Operator)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        assert_eq!(audit_seq(&w).await, head + 1);
        assert_eq!(denials(&w).await, first + bound + 1);
        let report = w.engine.store().verify_audit(None).await.unwrap();
        assert!(report.is_intact(), "{:#?}", report.problems);
    })
    .await;
}

/// A policy rule asks a person to look: the approval `decide` writes names that rule in its
/// `clears`, so it clears that rule's reason and would leave another rule's standing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_of_a_rules_reason_names_the_rule() {
    on_both(|store| async move {
        let w = world(store).await;
        let mut p = policy(2);
        p["rules"] = json!([{"id": "second-look", "when": "true",
                             "outcome": "human_required", "reason": "a person looks"}]);
        w.engine.set_policy(&w.ops, &p).await.unwrap();
        let (d, ev) = subject_with_evidence(&w, 1, "change A", "pass").await;
        let req = request(&w, json!({"max_runs": 1})).await;
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap();
        w.engine
            .submit_result(&w.rev, &answering("run-1", &d, &ev, "passed"))
            .await
            .unwrap();
        let first = w.engine.gate_run(&w.ops, EXEC).await.unwrap().decision;
        assert_eq!(first.outcome, Outcome::HumanRequired, "{first:?}");
        let hd = w
            .engine
            .decide(
                &w.alice,
                EXEC,
                HumanVerdict::Approve,
                "looked",
                &reviewed(&w).await,
            )
            .await
            .unwrap();
        let stored = human_decision(&w, &hd).await;
        assert_eq!(
            stored["clears"],
            json!([{"code": "policy_rule", "rule": "second-look"}])
        );
        let approved = w.engine.gate_run(&w.ops, EXEC).await.unwrap().decision;
        assert_eq!(approved.outcome, Outcome::Pass, "{approved:?}");
    })
    .await;
}
