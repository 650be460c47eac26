//! The reliability ledger over a real store: one observation per attempt, only the applicable
//! decision counts, and a verifier model change starts a new cohort. On SQLite and PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use verdict_engine::ledger::{AttemptClass, Cohort, Ledger, Window};

const WINDOW: Window = Window {
    attempts: 100,
    days: 30,
    min_sample: 1,
};

fn later() -> verdict_core::contracts::Timestamp {
    ts("2026-11-30T12:30:00Z")
}

async fn ledger(w: &World) -> Ledger {
    w.engine.store().set_manual_time(&later()).await.unwrap();
    w.engine.ledger(&w.ops, WINDOW).await.unwrap()
}

fn only(l: &Ledger) -> &Cohort {
    assert_eq!(l.cohorts.len(), 1, "{}", l.to_table());
    &l.cohorts[0]
}

fn with_model(mut r: Value, model: &str) -> Value {
    r["verifier"]["runtime"] = json!({"provider": "openai", "model": model, "snapshot": "2026-11"});
    r
}

/// Subject, passing evidence, a reviewer run on `model`, and a gate run that passes.
async fn pass_on(w: &World, generation: u64, diff: &str, run: &str, model: &str) {
    let (d, ev, _) = prepared(w, generation, diff, run).await;
    let r = with_model(result("rev", run, &d, generation, &ev), model);
    assert!(w.engine.submit_result(&w.rev, &r).await.unwrap().counted);
    let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
    assert_eq!(
        g.decision.outcome.as_str(),
        "pass",
        "{:?}",
        g.decision.reasons
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_and_re_verifications_are_counted_once() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 0, "change A", "run-1").await;
        let r = with_model(result("rev", "run-1", &d, 0, &ev), "m1");
        w.engine.submit_result(&w.rev, &r).await.unwrap();
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        // A second verifier run on the same subject, and the gate run again, twice.
        let req = request(&w, json!({})).await;
        w.engine
            .admit(&w.ops, &req, "rev2", "reviewer", "run-2")
            .await
            .unwrap();
        let r2 = with_model(result("rev2", "run-2", &d, 0, &ev), "m1");
        w.engine.submit_result(&w.rev2, &r2).await.unwrap();
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        w.engine
            .store()
            .set_manual_time(&ts("2026-11-30T12:05:00Z"))
            .await
            .unwrap();
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        w.engine.store().set_manual_time(&later()).await.unwrap();
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        // Two results, two decisions (the third gate run, with nothing time-sensitive in it,
        // has the second one's evaluation key).
        assert_eq!(history.decisions.len(), 2);
        assert_eq!(history.runs.len(), 2);

        let l = ledger(&w).await;
        let c = only(&l);
        assert_eq!((c.attempts, c.verified_passes), (1, 1));
        assert_eq!(c.pass_rate, Some(1.0));
        assert_eq!(c.first_attempt_pass_rate, Some(1.0));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_pass_stops_counting() {
    on_both(|store| async move {
        let w = world(store).await;
        pass_on(&w, 0, "change A", "run-1", "m1").await;
        assert_eq!(only(&ledger(&w).await).verified_passes, 1);
        // A new revision of the same attempt: the pass is for a subject that is no longer the
        // attempt's, so it stops counting at once...
        let (d, ev, _) = prepared(&w, 0, "change A, revised", "run-2").await;
        let l = ledger(&w).await;
        let c = only(&l);
        assert_eq!((c.attempts, c.verified_passes), (1, 0));
        assert_eq!(c.by_class.get(&AttemptClass::Unverified), Some(&1));
        // ...and once the revision is verified and gated, the attempt is the failure it is.
        let mut r = result("rev", "run-2", &d, 0, &ev);
        r["criteria"][0]["status"] = "failed".into();
        let r = with_model(r, "m1");
        assert!(w.engine.submit_result(&w.rev, &r).await.unwrap().counted);
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome.as_str(), "rework");
        let l = ledger(&w).await;
        let c = &l.cohorts[0];
        assert_eq!(l.cohorts.len(), 1);
        assert_eq!((c.attempts, c.verified_passes), (1, 0));
        assert_eq!(c.by_class.get(&AttemptClass::Rework), Some(&1));
        assert_eq!(c.pass_rate, Some(0.0));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_overturned_before_its_attempt_closed_stays_stale() {
    on_both(|store| async move {
        let w = world(store).await;
        pass_on(&w, 0, "change A", "run-1", "m1").await;
        let first = w
            .engine
            .execution_head(&w.ops, EXEC)
            .await
            .unwrap()
            .unwrap();
        // A hard failure of the required check is filed while the attempt is still open, and
        // nobody gates again before the next attempt starts.
        let mut fail = evidence(&first.subject_digest, "fail", "ci", "runner");
        fail["id"] = json!("ev-late-fail");
        w.engine.add_evidence(&w.ci, &[fail]).await.unwrap();
        prepared(&w, 1, "change B", "run-2").await;
        let attempts = w.engine.ledger_attempts(&w.ops, EXEC).await.unwrap();
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[0].class, AttemptClass::Stale, "{attempts:?}");
        // No cohort counts it as a verified pass.
        let l = ledger(&w).await;
        let passes: u64 = l.cohorts.iter().map(|c| c.verified_passes).sum();
        let stale: u64 = l
            .cohorts
            .iter()
            .filter_map(|c| c.by_class.get(&AttemptClass::Stale).copied())
            .sum();
        assert_eq!((passes, stale), (0, 1), "{}", l.to_table());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_that_stood_until_its_attempt_closed_keeps_counting() {
    on_both(|store| async move {
        let w = world(store).await;
        pass_on(&w, 0, "change A", "run-1", "m1").await;
        prepared(&w, 1, "change B", "run-2").await;
        let attempts = w.engine.ledger_attempts(&w.ops, EXEC).await.unwrap();
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[0].class, AttemptClass::Pass, "{attempts:?}");
        assert_eq!(attempts[1].class, AttemptClass::Unverified, "{attempts:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_required_never_counts_as_a_pass() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 0, "change A", "run-1").await;
        let mut r = result("rev", "run-1", &d, 0, &ev);
        r["criteria"][0]["status"] = "inconclusive".into();
        w.engine.submit_result(&w.rev, &r).await.unwrap();
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome.as_str(), "human_required");
        let l = ledger(&w).await;
        let c = only(&l);
        assert_eq!((c.attempts, c.covered, c.verified_passes), (1, 1, 0));
        assert_eq!(c.by_class.get(&AttemptClass::HumanRequired), Some(&1));
        assert_eq!(c.pass_rate, Some(0.0));
        assert_eq!(c.pass_rate_lower_95, Some(0.0));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_model_change_starts_a_new_cohort() {
    on_both(|store| async move {
        let w = world(store).await;
        pass_on(&w, 0, "change A", "run-1", "m1").await;
        // The next attempt (a retry: a new generation) is verified by another model.
        pass_on(&w, 1, "change B", "run-2", "m2").await;
        let l = ledger(&w).await;
        assert_eq!(l.cohorts.len(), 2, "{}", l.to_table());
        let models: Vec<&str> = l
            .cohorts
            .iter()
            .map(|c| c.key.verifiers[0].model.as_str())
            .collect();
        assert_eq!(models, ["openai/m1@2026-11", "openai/m2@2026-11"]);
        for c in &l.cohorts {
            // Each cohort has its one attempt, a pass; the closed attempt's pass still stands.
            assert_eq!((c.attempts, c.verified_passes), (1, 1), "{}", c.key.label());
        }
        // Attempt numbers run per execution: only the first is a first attempt.
        assert_eq!(l.cohorts[0].first_attempts, 1);
        assert_eq!(l.cohorts[1].first_attempts, 0);
        assert_eq!(l.cohorts[1].first_attempt_pass_rate, None);
        // The same model again joins the first cohort.
        pass_on(&w, 2, "change C", "run-3", "m1").await;
        let l = ledger(&w).await;
        assert_eq!(l.cohorts.len(), 2);
        assert_eq!(l.cohorts[0].attempts, 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_verification_is_a_coverage_gap_not_a_failure() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _, _) = prepared(&w, 0, "change A", "run-1").await;
        let mut r = result("rev", "run-1", &d, 0, "unused");
        r["status"] = "unavailable".into();
        r["unavailable_reason"] = "timeout".into();
        r["criteria"] = json!([]);
        w.engine.submit_result(&w.rev, &r).await.unwrap();
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(g.decision.outcome.as_str(), "blocked");
        let l = ledger(&w).await;
        let c = only(&l);
        assert_eq!((c.attempts, c.covered), (1, 0));
        assert_eq!(c.by_class.get(&AttemptClass::CoverageGap), Some(&1));
        // Nothing was rated: the rates have a zero denominator and are null, not zero.
        assert_eq!((c.pass_rate, c.pass_rate_lower_95), (None, None));
        assert_eq!(c.coverage, Some(0.0));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_names_the_capability_else_the_subject_does() {
    on_both(|store| async move {
        let w = world(store).await;
        pass_on(&w, 0, "change A", "run-1", "m1").await;
        let l = ledger(&w).await;
        assert_eq!(only(&l).key.capability, "-:work_package");
        // The next attempt's request names its capability.
        let (d, ev) = subject_with_evidence(&w, 1, "change B", "pass").await;
        let req = w
            .engine
            .create_request_for(&w.coder, EXEC, &json!({}), Some("migrations"))
            .await
            .unwrap();
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-2")
            .await
            .unwrap();
        let r = with_model(result("rev", "run-2", &d, 1, &ev), "m1");
        w.engine.submit_result(&w.rev, &r).await.unwrap();
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        // A later request about the subject from a producer that is not its producer (the
        // store takes it; the ledger does not). A principal writes only in its own role, so
        // this is another producer.
        w.engine
            .add_principal(&w.ops, "coder-2", verdict_core::contracts::Role::Producer)
            .await
            .unwrap();
        w.engine
            .grant(
                &w.ops,
                "g-coder-2",
                "coder-2",
                verdict_store::ScopeKind::Execution,
                EXEC,
                verdict_store::Access::Write,
                &"2027-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        // A whole request (every member a request has, so the database's structural check
        // since schema 13 takes it too), copied from the true one, naming another capability.
        let mut forged = w
            .engine
            .store()
            .get(verdict_store::DocKind::Request, &req)
            .await
            .unwrap()
            .unwrap()
            .value()
            .unwrap();
        forged["capability"] = json!("forged");
        w.engine
            .store()
            .put(
                &verdict_store::Actor::new("coder-2", verdict_core::contracts::Role::Producer),
                verdict_store::DocKind::Request,
                &forged,
            )
            .await
            .unwrap();
        let l = ledger(&w).await;
        let caps: Vec<&str> = l
            .cohorts
            .iter()
            .map(|c| c.key.capability.as_str())
            .collect();
        assert_eq!(caps, ["-:work_package", "migrations"]);
        assert!(
            w.engine
                .create_request_for(&w.coder, EXEC, &json!({}), Some(""))
                .await
                .is_err()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_revision_change_starts_a_new_cohort() {
    on_both(|store| async move {
        let w = world(store).await;
        for (generation, diff, run, prompt) in [
            (0, "change A", "run-1", "judge-1"),
            (1, "change B", "run-2", "judge-2"),
        ] {
            let (d, ev, _) = prepared(&w, generation, diff, run).await;
            let report = verdict_engine::RunReport {
                manifest: json!({"construction": {"revision": prompt}}),
                receipts: vec![],
                detail: None,
                cache_key: None,
            };
            w.engine
                .record_run_context(&w.rev, run, &report)
                .await
                .unwrap();
            let r = with_model(result("rev", run, &d, generation, &ev), "m1");
            w.engine.submit_result(&w.rev, &r).await.unwrap();
            w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        }
        let l = ledger(&w).await;
        let prompts: Vec<&str> = l
            .cohorts
            .iter()
            .map(|c| c.key.verifiers[0].prompt.as_str())
            .collect();
        assert_eq!(prompts, ["judge-1", "judge-2"], "{}", l.to_table());
        assert!(l.cohorts.iter().all(|c| c.verified_passes == 1));
    })
    .await;
}

/// On a store keeping the system clock, the ledger read its `now` once and each execution's
/// attempts read it again, later: an attempt never decided, dated at that later instant, fell
/// outside the window ending at the first, so a failed revision left undecided vanished and the
/// pass rate read 1.0. The whole ledger is counted at one instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_never_decided_is_counted_on_a_real_clock_too() {
    on_both(|store| async move {
        let w = world_on(store, verdict_store::StoreClock::System).await;
        pass_on(&w, 0, "change A", "run-1", "m1").await;
        // A revision of the same attempt that nobody gates: the attempt is unverified.
        prepared(&w, 0, "change A, revised", "run-2").await;
        pass_on(&w, 1, "change B", "run-3", "m1").await;
        let l = w.engine.ledger(&w.ops, WINDOW).await.unwrap();
        assert_eq!(l.clock, verdict_store::StoreClock::System);
        let attempts: u64 = l.cohorts.iter().map(|c| c.attempts).sum();
        assert_eq!(attempts, 2, "{}", l.to_table());
        let unverified: u64 = l
            .cohorts
            .iter()
            .filter_map(|c| c.by_class.get(&AttemptClass::Unverified))
            .sum();
        assert_eq!(unverified, 1, "{}", l.to_table());
    })
    .await;
}

/// Attempt 0 filed under `capability` by its producer, failed by the reviewer, and gated:
/// `rework`.
async fn rework_filed_under(w: &World, capability: &str) {
    let (d, ev) = subject_with_evidence(w, 0, "change A", "pass").await;
    let req = w
        .engine
        .create_request_for(&w.coder, EXEC, &json!({}), Some(capability))
        .await
        .unwrap();
    w.engine
        .admit(&w.ops, &req, "rev", "reviewer", "run-1")
        .await
        .unwrap();
    let mut r = result("rev", "run-1", &d, 0, &ev);
    r["criteria"][0]["status"] = "failed".into();
    w.engine
        .submit_result(&w.rev, &with_model(r, "m1"))
        .await
        .unwrap();
    let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
    assert_eq!(g.decision.outcome.as_str(), "rework");
}

/// A producer files its attempt under one capability, fails, then asks for verification
/// again naming another: the failed attempt stays in the cohort it was first filed under.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_stays_under_the_capability_it_was_first_filed_under() {
    on_both(|store| async move {
        let w = world(store).await;
        rework_filed_under(&w, "rust-change").await;
        // After the decision, a request naming another capability.
        w.engine
            .create_request_for(&w.coder, EXEC, &json!({}), Some("scratch"))
            .await
            .unwrap();
        let l = ledger(&w).await;
        let c = only(&l);
        assert_eq!(c.key.capability, "rust-change", "{}", l.to_table());
        assert_eq!(c.by_class.get(&AttemptClass::Rework), Some(&1));
    })
    .await;
}

/// A ledger counted on a store whose time its users chose says so in every rendering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_names_the_stores_clock() {
    on_both(|store| async move {
        let w = world(store).await;
        pass_on(&w, 0, "change A", "run-1", "m1").await;
        let l = ledger(&w).await;
        assert_eq!(l.clock, verdict_store::StoreClock::Manual);
        let table = l.to_table();
        assert!(
            table.lines().next().unwrap().ends_with("(manual clock)"),
            "{table}"
        );
        assert!(table.contains("no record of real work"), "{table}");
        let csv = l.to_csv();
        assert!(csv.starts_with("clock,capability,"), "{csv}");
        assert!(csv.lines().nth(1).unwrap().starts_with("manual,"), "{csv}");
        let json = serde_json::to_value(&l).unwrap();
        assert_eq!(json["clock"], "manual");
    })
    .await;
}

/// A failing result and the gate's rework on attempt 0.
async fn rework_on(w: &World, generation: u64, diff: &str, run: &str) {
    let (d, ev, _) = prepared(w, generation, diff, run).await;
    let mut r = result("rev", run, &d, generation, &ev);
    r["criteria"][0]["status"] = "failed".into();
    assert!(
        w.engine
            .submit_result(&w.rev, &with_model(r, "m1"))
            .await
            .unwrap()
            .counted
    );
    let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
    assert_eq!(g.decision.outcome.as_str(), "rework");
}

/// An operator sets a lenient policy on a second gate, and anyone who may read the execution
/// runs that gate on a failed attempt: its pass was the latest decision about the attempt's
/// subject, so this gate's ledger counted it and the rework vanished. A gate's ledger reads
/// only decisions under the policies that gate was set to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_under_another_gate_never_counts_in_this_gates_ledger() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        rework_on(&w, 0, "change A", "run-1").await;
        let smoke = verdict_engine::Engine::new(store, "smoke");
        smoke
            .set_policy(
                &w.ops,
                &json!({
                    "schema": "verdict.policy/v1",
                    "name": "smoke",
                    "revision": 1,
                    "required_checks": ["unit-tests"],
                    "required_verifiers": ["reviewer"],
                    "optional_criteria": ["tests-pass"],
                }),
            )
            .await
            .unwrap();
        let lenient = smoke.gate_run(&w.coder, EXEC).await.unwrap();
        assert_eq!(lenient.decision.outcome.as_str(), "pass");
        pass_on(&w, 1, "change B", "run-2", "m1").await;
        let l = ledger(&w).await;
        let c = only(&l);
        assert_eq!((c.attempts, c.verified_passes), (2, 1), "{}", l.to_table());
        assert_eq!(c.by_class.get(&AttemptClass::Rework), Some(&1));
        assert_eq!(c.key.policy, "merge@1");
    })
    .await;
}

/// After a rework, the producer puts a revision of the same attempt and never has it gated,
/// or makes it one no verifier can answer (a coverage gap, left out of the rates), and files it
/// under another capability: the failed attempt left its cohort or the rates. An attempt that
/// was judged and failed keeps that failure, under the capability it was first filed under.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_left_undecided_does_not_hide_a_failed_attempt() {
    on_both(|store| async move {
        let w = world(store).await;
        rework_filed_under(&w, "cap-a").await;
        // A revision of the same attempt, filed under another capability, never gated.
        subject_with_evidence(&w, 0, "change A, revised", "pass").await;
        w.engine
            .create_request_for(&w.coder, EXEC, &json!({}), Some("cap-z"))
            .await
            .unwrap();
        let l = ledger(&w).await;
        let c = only(&l);
        assert_eq!(c.key.capability, "cap-a", "{}", l.to_table());
        assert_eq!(
            c.by_class.get(&AttemptClass::Rework),
            Some(&1),
            "{}",
            l.to_table()
        );
        assert_eq!(c.pass_rate, Some(0.0));
    })
    .await;
}

/// Two gates can hold the same policy: one the gate held earlier, set on a second gate after
/// the first moved to a stricter one. A pass the second gate made under it, after the first had
/// left it, is no decision of the first: its ledger counts a policy only while it held it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_under_a_policy_this_gate_held_at_another_time_never_counts() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        let lenient = json!({
            "schema": "verdict.policy/v1",
            "name": "merge",
            "revision": 2,
            "required_checks": ["unit-tests"],
            "required_verifiers": ["reviewer"],
            "optional_criteria": ["tests-pass"],
        });
        w.engine.set_policy(&w.ops, &lenient).await.unwrap();
        w.engine.set_policy(&w.ops, &policy(3)).await.unwrap();
        let smoke = verdict_engine::Engine::new(store, "smoke");
        smoke.set_policy(&w.ops, &lenient).await.unwrap();
        rework_on(&w, 0, "change A", "run-1").await;
        let pass = smoke.gate_run(&w.coder, EXEC).await.unwrap();
        assert_eq!(pass.decision.outcome.as_str(), "pass");
        pass_on(&w, 1, "change B", "run-2", "m1").await;
        let l = ledger(&w).await;
        let c = only(&l);
        assert_eq!((c.attempts, c.verified_passes), (2, 1), "{}", l.to_table());
        assert_eq!(c.by_class.get(&AttemptClass::Rework), Some(&1));
        assert_eq!(c.key.policy, "merge@3");
    })
    .await;
}
