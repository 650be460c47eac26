//! What a verification request pins and what admission enforces: the gate's current policy,
//! the request's budget, and the open blockers of every earlier subject of the lineage, gated
//! or not. Each test runs on SQLite and on PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use verdict_core::contracts::{Outcome, ReasonCode};
use verdict_core::digest::Digest;

/// Subject A of generation 1, whose reviewer reports a change-scoped blocker `f-leak`.
async fn a_with_a_blocker(w: &World) {
    let (a, ev_a) = subject_with_evidence(w, 1, "change A", "pass").await;
    review(w, "run-a", &a, &ev_a, |r| {
        r["criteria"][0]["status"] = json!("failed");
        r["findings"] = json!([blocker("f-leak", &a, &ev_a)]);
    })
    .await;
}

fn blocker(id: &str, subject: &Digest, ev: &str) -> Value {
    json!({
        "id": id, "version": 1, "criterion": "tests-pass", "type": "bug",
        "severity": "blocker", "scope": "change", "subject_digest": subject.as_str(),
        "evidence_refs": [ev], "method": "review"
    })
}

/// Requests, admits `run` and submits the reviewer's result built by `edit`.
async fn review(
    w: &World,
    run: &str,
    d: &Digest,
    ev: &str,
    edit: impl FnOnce(&mut Value),
) -> Value {
    let req = request(w, json!({})).await;
    let pre = w
        .engine
        .admit(&w.ops, &req, "rev", "reviewer", run)
        .await
        .unwrap();
    assert!(!pre.skipped, "{pre:?}");
    let mut r = result("rev", run, d, 1, ev);
    edit(&mut r);
    let sub = w.engine.submit_result(&w.rev, &r).await.unwrap();
    assert!(sub.counted, "{sub:?}");
    w.engine
        .store()
        .get(verdict_store::DocKind::Request, &req)
        .await
        .unwrap()
        .unwrap()
        .value()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_pinned_to_a_replaced_policy_admits_no_run() {
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "change A", "pass").await;
        let req = request(&w, json!({})).await;
        w.engine.set_policy(&w.ops, &policy(2)).await.unwrap();
        let e = w
            .engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-a")
            .await
            .unwrap_err();
        assert_eq!(e.code(), "conflict");
        assert!(e.to_string().contains("no longer gate"), "{e}");
        assert!(w.engine.store().run("run-a").await.unwrap().is_none());
        // A request made under the new revision admits as usual.
        let fresh = request(&w, json!({})).await;
        w.engine
            .admit(&w.ops, &fresh, "rev", "reviewer", "run-a")
            .await
            .unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_runs_is_enforced_at_admission() {
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "change A", "pass").await;
        let req = request(&w, json!({"max_runs": 1})).await;
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap();
        let e = w
            .engine
            .admit(&w.ops, &req, "rev2", "reviewer", "run-2")
            .await
            .unwrap_err();
        assert_eq!(e.code(), "conflict");
        assert!(e.to_string().contains("allows 1 run"), "{e}");
        assert!(w.engine.store().run("run-2").await.unwrap().is_none());
    })
    .await;
}

/// The seq of the audit chain's last event.
async fn chain_length(w: &World) -> u64 {
    w.engine
        .store()
        .audit_head()
        .await
        .unwrap()
        .map_or(0, |h| h.seq)
}

async fn denials(w: &World) -> usize {
    w.engine.store().denials(0, 10_000).await.unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_admission_writes_nothing_but_its_denial() {
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "change A", "pass").await;
        let req = request(&w, json!({"max_runs": 1})).await;
        w.engine
            .admit(&w.rev, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap();
        let (before, refused) = (chain_length(&w).await, denials(&w).await);
        // The cap is reached: neither a verifier admitting itself nor an operator, however
        // often it asks, moves the request's lease or writes anything else.
        for (caller, verifier, run) in [
            (&w.rev2, "rev2", "run-2"),
            (&w.rev2, "rev2", "run-3"),
            (&w.rev, "rev", "run-4"),
            (&w.ops, "rev2", "run-5"),
        ] {
            let e = w
                .engine
                .admit(caller, &req, verifier, "reviewer", run)
                .await
                .unwrap_err();
            assert_eq!(e.code(), "conflict", "{run}: {e}");
            assert!(
                e.to_string()
                    .contains("allows 1 run(s) and 1 were admitted"),
                "{run}: {e}"
            );
            assert_eq!(chain_length(&w).await, before, "{run}");
            assert!(w.engine.store().run(run).await.unwrap().is_none(), "{run}");
        }
        assert_eq!(denials(&w).await, refused);

        // A capped request with runs left: each refusal known before the request's turn is
        // made before it. A class it does not ask for and a run id stored for another
        // admission write nothing; a refusal of authority writes its denial and nothing else.
        let open = request(&w, json!({"max_runs": 2})).await;
        let before = chain_length(&w).await;
        let e = w
            .engine
            .admit(&w.ops, &open, "rev2", "auditor", "run-6")
            .await
            .unwrap_err();
        assert_eq!(e.code(), "invalid_input", "{e}");
        let e = w
            .engine
            .admit(&w.ops, &open, "rev2", "reviewer", "run-1")
            .await
            .unwrap_err();
        assert_eq!(e.code(), "conflict", "{e}");
        assert!(e.to_string().contains("already stored"), "{e}");
        assert_eq!(chain_length(&w).await, before);
        assert_eq!(denials(&w).await, refused);
        for (who, run, code) in [
            ("coder", "run-7", "self_verification_denied"),
            ("alice", "run-8", "permission_denied"),
        ] {
            let at = chain_length(&w).await;
            let e = w
                .engine
                .admit(&w.ops, &open, who, "reviewer", run)
                .await
                .unwrap_err();
            assert_eq!(e.code(), code, "{who}: {e}");
            let after = w.engine.store().audit_events(at, 10).await.unwrap();
            assert_eq!(after.len(), 1, "{who}: {after:?}");
            assert_eq!(after[0].table, "denials", "{who}: {after:?}");
        }
        assert_eq!(denials(&w).await, refused + 2);
        // Nothing was taken from the request: both of its runs are still there.
        for (caller, verifier, run) in [(&w.rev, "rev", "run-9"), (&w.rev2, "rev2", "run-10")] {
            w.engine
                .admit(caller, &open, verifier, "reviewer", run)
                .await
                .unwrap();
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_admissions_for_the_last_run_admit_exactly_one() {
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "change A", "pass").await;
        for round in 0..4 {
            let req = request(&w, json!({"max_runs": 1, "timeout_s": round + 1})).await;
            let (a, b) = (format!("run-{round}-a"), format!("run-{round}-b"));
            let (r1, r2) = tokio::join!(
                w.engine.admit(&w.ops, &req, "rev", "reviewer", &a),
                w.engine.admit(&w.ops, &req, "rev2", "reviewer", &b),
            );
            assert_eq!(
                usize::from(r1.is_ok()) + usize::from(r2.is_ok()),
                1,
                "round {round}: {r1:?} {r2:?}"
            );
            let loser = r1.err().or(r2.err()).unwrap();
            assert_eq!(loser.code(), "conflict", "{loser}");
            // The lease is released, and the cap refuses a third try.
            let lease = w
                .engine
                .store()
                .pointer(verdict_store::PointerKind::Lease, &format!("admit {req}"))
                .await
                .unwrap()
                .unwrap()
                .lease()
                .unwrap();
            assert!(lease.is_none(), "round {round}: {lease:?}");
            let again = w
                .engine
                .admit(&w.ops, &req, "rev2", "reviewer", &format!("run-{round}-c"))
                .await
                .unwrap_err();
            assert!(again.to_string().contains("allows 1 run"), "{again}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_left_by_a_crashed_admission_blocks_until_it_lapses() {
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "change A", "pass").await;
        let req = request(&w, json!({"max_runs": 2})).await;
        // An operator's admission that crashed holding the lease (the engine's own principal
        // writes nothing outside the system role).
        let system = w.ops.actor();
        let stuck = verdict_store::LeaseHolder {
            holder: verdict_engine::ENGINE_PRINCIPAL.parse().unwrap(),
            expires_at: now().plus_seconds(60),
        };
        w.engine
            .store()
            .cas_lease(&system, &format!("admit {req}"), None, Some(&stuck))
            .await
            .unwrap();
        let e = w
            .engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("in progress"), "{e}");
        w.engine
            .store()
            .set_manual_time(&now().plus_seconds(61))
            .await
            .unwrap();
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_with_a_typo_or_an_impossible_cap_is_refused() {
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "change A", "pass").await;
        for budget in [
            json!({"max_run": 1}),
            json!({"max_runs": 0}),
            json!({"timeout_s": -3}),
            json!([1]),
        ] {
            let e = w
                .engine
                .create_request(&w.coder, EXEC, &budget)
                .await
                .unwrap_err();
            assert_eq!(e.code(), "invalid_input", "{budget}: {e}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocker_on_a_subject_never_gated_binds_the_next_subject() {
    on_both(|store| async move {
        let w = world(store).await;
        a_with_a_blocker(&w).await;
        // No gate run on A: the producer moves straight on.
        let (b, ev_b) = subject_with_evidence(&w, 1, "change B", "pass").await;
        let req = request(&w, json!({})).await;
        let req = w
            .engine
            .store()
            .get(verdict_store::DocKind::Request, &req)
            .await
            .unwrap()
            .unwrap()
            .value()
            .unwrap();
        assert_eq!(req["prior_blockers"], json!([{"id": "f-leak", "version": 1}]));
        // Until a counted result disposes of it, B cannot pass.
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(g.decision.outcome, Outcome::Pass);
        assert!(
            g.decision
                .reasons
                .iter()
                .any(|r| r.code == ReasonCode::PriorBlockerUnaddressed),
            "{:?}",
            g.decision.reasons
        );
        // Resolved with evidence on B: B passes.
        let ev = ev_b.clone();
        review(&w, "run-b", &b, &ev_b, move |r| {
            r["dispositions"] = json!([{"finding": "f-leak", "version": 1, "disposition": "resolved", "evidence_refs": [ev]}]);
        })
        .await;
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome, Outcome::Pass, "{:?}", g.decision.reasons);
        // Resolved on B, the blocker no longer binds C.
        subject_with_evidence(&w, 1, "change C", "pass").await;
        let pinned = w
            .engine
            .prior_blockers(&w.ops, EXEC, &sd(&subject(1, "change C")))
            .await
            .unwrap();
        assert!(pinned.is_empty(), "{pinned:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocker_still_present_on_an_ungated_subject_stays_open() {
    on_both(|store| async move {
        let w = world(store).await;
        a_with_a_blocker(&w).await;
        let (b, ev_b) = subject_with_evidence(&w, 1, "change B", "pass").await;
        let ev = ev_b.clone();
        review(&w, "run-b", &b, &ev_b, move |r| {
            r["criteria"][0]["status"] = json!("failed");
            r["dispositions"] = json!([{"finding": "f-leak", "version": 1, "disposition": "still_present", "evidence_refs": [ev]}]);
        })
        .await;
        // Neither A nor B was gated; C still inherits the blocker.
        let c = sd(&subject(1, "change C"));
        subject_with_evidence(&w, 1, "change C", "pass").await;
        let pinned = w.engine.prior_blockers(&w.ops, EXEC, &c).await.unwrap();
        assert_eq!(pinned.len(), 1, "{pinned:?}");
        assert_eq!(pinned[0].0.as_str(), "f-leak");
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert!(
            g.decision
                .reasons
                .iter()
                .any(|r| r.code == ReasonCode::PriorBlockerUnaddressed),
            "{:?}",
            g.decision.reasons
        );
    })
    .await;
}

/// An admission note as the engine writes it, for `run` of `req` on subject `d`.
fn note(run: &str, req: &Digest, d: &Digest, verifier: &str, skipped: bool) -> Value {
    json!({
        "schema": verdict_engine::ADMISSION_SCHEMA,
        "run_id": run, "request_digest": req.as_str(), "subject_digest": d.as_str(),
        "generation": 1, "verifier": verifier, "class": "reviewer",
        "preflight": {"outcome": "pass", "skipped": skipped, "reasons": []},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_notes_no_run_record_confirms_are_ignored() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _) = subject_with_evidence(&w, 1, "change A", "pass").await;
        let req = request(&w, json!({"max_runs": 1})).await;
        // The producer may write to the requests table; a note it forges names no real run.
        w.engine
            .store()
            .put(
                &w.coder.actor(),
                verdict_store::DocKind::Request,
                &note("run-forged", &req, &d, "rev", false),
            )
            .await
            .unwrap();
        assert!(
            w.engine
                .admission_notes(&w.ops, EXEC)
                .await
                .unwrap()
                .is_empty()
        );
        // So it neither uses up the request's only run nor shows in history.
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap();
        let notes = w.engine.admission_notes(&w.ops, EXEC).await.unwrap();
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].run_id.as_str(), "run-1");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_admission_stopped_before_cancelling_is_still_never_called() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _) = subject_with_evidence(&w, 1, "change A", "pass").await;
        let req = request(&w, json!({})).await;
        // What an admission that died after its note and run record leaves behind: preflight
        // said skip, but the run was never cancelled (an operator's admission).
        let system = w.ops.actor();
        let store = w.engine.store();
        store
            .put(
                &system,
                verdict_store::DocKind::Request,
                &note("run-1", &req, &d, "rev", true),
            )
            .await
            .unwrap();
        let admission = verdict_store::RunAdmission {
            run_id: "run-1".parse().unwrap(),
            request_digest: req.clone(),
            subject_digest: d.clone(),
            verifier: "rev".parse().unwrap(),
            class: "reviewer".parse().unwrap(),
            admitted_generation: 1,
        };
        store.admit_run(&system, &admission).await.unwrap();
        let model = Counting(std::sync::atomic::AtomicUsize::new(0));
        let out = w.engine.run_model(&w.rev, "run-1", &model).await.unwrap();
        assert!(
            matches!(out, verdict_engine::RunOutcome::Skipped(_)),
            "{out:?}"
        );
        assert_eq!(model.0.load(std::sync::atomic::Ordering::SeqCst), 0);
        let run = store.run("run-1").await.unwrap().unwrap();
        assert_eq!(run.status(), Some(verdict_store::RunStatus::Cancelled));
    })
    .await;
}

/// A request asks the verifier classes of the subject's effective risk class: the producer
/// states its subject `low`, and a policy whose `risk_floor` is `high` still has the request
/// ask for the class the risk table adds for `high` work (docs/spec/request.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_asks_the_classes_of_the_risk_floor() {
    on_both(|store| async move {
        let w = world(store).await;
        let classes = |req: Value| req["verifier_classes"].clone();
        let mut p = policy(2);
        p["risk"] = json!({"high": {"required_verifiers": ["security"]}});
        w.engine.set_policy(&w.ops, &p).await.unwrap();
        subject_with_evidence(&w, 1, "change A", "pass").await;
        let read = |req: Digest| {
            let w = &w;
            async move {
                w.engine
                    .store()
                    .get(verdict_store::DocKind::Request, &req)
                    .await
                    .unwrap()
                    .unwrap()
                    .value()
                    .unwrap()
            }
        };
        // Taken at its word, the low subject needs the reviewer alone.
        let req = read(request(&w, json!({})).await).await;
        assert_eq!(classes(req.clone()), json!(["reviewer"]), "{req}");
        assert_eq!(req["risk_class"], "low");
        p["revision"] = json!(3);
        p["risk_floor"] = json!("high");
        w.engine.set_policy(&w.ops, &p).await.unwrap();
        let req = read(request(&w, json!({})).await).await;
        assert_eq!(
            classes(req.clone()),
            json!(["reviewer", "security"]),
            "{req}"
        );
        // The request still says the class the subject states.
        assert_eq!(req["risk_class"], "low");
    })
    .await;
}
