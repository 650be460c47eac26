//! A gate run that finds its evaluation stored appends nothing, and the engine's gate-run cache
//! answers only while its answer is proven current: any write, or time moving past an instant at
//! which the evaluation key changes, makes the next run evaluate, and a run with the cache
//! returns the same bytes as a run without it.

use crate::common::*;
use serde_json::{Value, json};
use verdict_core::contracts::Outcome;
use verdict_core::digest::Digest;
use verdict_engine::{Engine, GateRun};
use verdict_store::{About, Access, DocKind, ScopeKind, Store};

/// An engine over the same store handle (so the same manual clock) with no gate-run cache.
fn uncached(w: &World) -> Engine {
    Engine::with_gate_cache(w.engine.store().clone(), "merge", 0)
}

async fn head_seq(store: &dyn Store) -> u64 {
    store.audit_head().await.unwrap().map_or(0, |h| h.seq)
}

fn hits(w: &World) -> u64 {
    w.engine.gate_cache_stats().0
}

/// Runs the gate until an answer is cached (the first run may store the decision, the next
/// finds it stored and keeps it), then once more from the cache; returns that answer.
async fn cached_run(w: &World) -> GateRun {
    w.engine.gate_run(&w.ops, EXEC).await.unwrap();
    w.engine.gate_run(&w.ops, EXEC).await.unwrap();
    let before = hits(w);
    let run = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
    assert_eq!(
        hits(w),
        before + 1,
        "the third run is answered from the cache"
    );
    assert!(!run.inserted);
    run
}

/// Runs the gate with the cache, then without it, and checks both give the same answer; returns
/// the cached engine's run.
async fn same_as_uncached(w: &World, plain: &Engine) -> GateRun {
    let with = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
    let without = plain.gate_run(&w.ops, EXEC).await.unwrap();
    assert_eq!(with.bytes, without.bytes);
    assert!(!without.inserted, "the cached engine's run stored it first");
    with
}

/// Check evidence about `subject` for `unit-tests` with `outcome`, observed at `observed_at`,
/// stale after `max_age_s` seconds (content evidence when none).
fn dated_evidence(
    subject: &Digest,
    id: &str,
    outcome: &str,
    observed_at: &str,
    max_age_s: Option<u64>,
) -> Value {
    let freshness = match max_age_s {
        Some(s) => json!({"kind": "time", "max_age_s": s}),
        None => json!({"kind": "content"}),
    };
    json!({
        "id": id,
        "kind": "check",
        "check": "unit-tests",
        "subject_digest": subject.as_str(),
        "definition_digest": DEF,
        "produced_by": {"principal": "ci", "role": "runner"},
        "outcome": outcome,
        "content_digest": verdict_core::digest::raw(id.as_bytes()).as_str(),
        "observed_at": observed_at,
        "freshness": freshness
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_run_that_finds_its_decision_stored_appends_nothing() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        passed(&w, 1, "change A", "run-a").await;
        // Later, at another `now` (the evidence is content evidence: the same evaluation).
        w.engine
            .set_manual_time(&ts("2026-11-30T12:30:00Z"))
            .await
            .unwrap();
        let plain = uncached(&w);
        let before = head_seq(store.as_ref()).await;
        let again = plain.gate_run(&w.ops, EXEC).await.unwrap();
        let cached = w.engine.gate_run(&w.rev, EXEC).await.unwrap();
        assert_eq!(head_seq(store.as_ref()).await, before, "nothing appended");
        assert!(!again.inserted && !cached.inserted);
        assert_eq!(again.bytes, cached.bytes);
        let key = again.decision.evaluation_key.clone().unwrap();
        // The stored decision keeps its own record, written with it, and replays from it.
        let records = store.evaluations(&key).await.unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(
            records[0].value().unwrap()["now"],
            json!("2026-11-30T12:00:00Z")
        );
        let replayed = w.engine.gate_replay(&w.ops, &key).await.unwrap();
        assert_eq!(replayed.bytes, again.bytes);
        let report = w.engine.verify_store(None).await.unwrap();
        assert!(report.is_intact(), "{:?}", report.problems);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_runs_racing_with_the_cache_store_one_decision_with_its_record() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        let (d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        w.engine
            .submit_result(&w.rev, &result("rev", "run-a", &d, 1, &ev))
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for p in [&w.ops, &w.coder, &w.rev, &w.ci] {
            let (engine, p) = (w.engine.clone(), p.clone());
            tasks.push(tokio::spawn(async move { engine.gate_run(&p, EXEC).await }));
        }
        let mut runs = Vec::new();
        for t in tasks {
            runs.push(t.await.unwrap().unwrap());
        }
        assert_eq!(
            runs.iter().filter(|r| r.inserted).count(),
            1,
            "one stores it"
        );
        assert!(runs.iter().all(|r| r.bytes == runs[0].bytes));
        let decisions = store
            .list(DocKind::Decision, &About::Execution(EXEC.into()))
            .await
            .unwrap();
        assert_eq!(decisions.len(), 1);
        let key = runs[0].decision.evaluation_key.clone().unwrap();
        assert!(!store.evaluations(&key).await.unwrap().is_empty());
        assert_eq!(
            w.engine.gate_replay(&w.ops, &key).await.unwrap().bytes,
            runs[0].bytes
        );
        let report = w.engine.verify_store(None).await.unwrap();
        assert!(report.is_intact(), "{:?}", report.problems);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_evidence_after_a_cached_run_makes_the_next_run_evaluate() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = passed(&w, 1, "change A", "run-a").await;
        let plain = uncached(&w);
        let old = cached_run(&w).await;
        assert_eq!(old.decision.outcome, Outcome::Pass);
        // Failing evidence for the same check: the run must see it.
        let ev = dated_evidence(&d, "ev-late-fail", "fail", "2026-11-30T11:59:30Z", None);
        w.engine.add_evidence(&w.ci, &[ev]).await.unwrap();
        let before = hits(&w);
        let new = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(hits(&w), before, "not answered from the cache");
        assert!(new.inserted);
        assert_ne!(new.bytes, old.bytes);
        assert_ne!(new.decision.outcome, Outcome::Pass);
        same_as_uncached(&w, &plain).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_after_a_cached_run_makes_the_next_run_evaluate() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        let plain = uncached(&w);
        let old = cached_run(&w).await;
        assert_ne!(old.decision.outcome, Outcome::Pass, "no reviewer yet");
        w.engine
            .submit_result(&w.rev, &result("rev", "run-a", &d, 1, &ev))
            .await
            .unwrap();
        let before = hits(&w);
        let new = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(hits(&w), before);
        assert!(new.inserted);
        assert_eq!(new.decision.outcome, Outcome::Pass);
        same_as_uncached(&w, &plain).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_change_after_a_cached_run_makes_the_next_run_evaluate() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-a").await;
        let plain = uncached(&w);
        let old = cached_run(&w).await;
        w.engine.set_policy(&w.ops, &policy(2)).await.unwrap();
        let before = hits(&w);
        let new = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(hits(&w), before);
        assert!(new.inserted);
        assert_ne!(new.decision.evaluation_key, old.decision.evaluation_key);
        same_as_uncached(&w, &plain).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_after_a_cached_run_refuses_the_next_run() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-a").await;
        let plain = uncached(&w);
        cached_run(&w).await;
        w.engine
            .cancel_execution(&w.ops, EXEC, "abandoned")
            .await
            .unwrap();
        let before = hits(&w);
        let with = w.engine.gate_run(&w.ops, EXEC).await.unwrap_err();
        let without = plain.gate_run(&w.ops, EXEC).await.unwrap_err();
        assert_eq!(hits(&w), before);
        assert_eq!(with.code(), "conflict");
        assert_eq!(with.to_string(), without.to_string());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_leaves_the_decision_alone_still_makes_the_next_run_evaluate() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = passed(&w, 1, "change A", "run-a").await;
        let old = cached_run(&w).await;
        // Another passing piece of evidence: a write the decision may not depend on in the
        // end, but the cache cannot know that without evaluating.
        let ev = dated_evidence(&d, "ev-more", "pass", "2026-11-30T11:59:30Z", None);
        w.engine.add_evidence(&w.ci, &[ev]).await.unwrap();
        let before = hits(&w);
        let new = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(
            hits(&w),
            before,
            "a moved chain is never answered from the cache"
        );
        assert_eq!(new.decision.outcome, old.decision.outcome);
        // And once that evaluation is found stored, it is cached again.
        cached_run(&w).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_past_an_evidence_max_age_changes_the_decision_as_without_the_cache() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _) = subject_with_evidence(&w, 1, "change A", "pass").await;
        // Time-sensitive evidence observed at 11:59:00 with a 600 s age limit: stale from
        // 12:09:00 on.
        let ev = dated_evidence(&d, "ev-live", "pass", "2026-11-30T11:59:00Z", Some(600));
        w.engine.add_evidence(&w.ci, &[ev]).await.unwrap();
        let req = request(&w, json!({"max_runs": 1})).await;
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-a")
            .await
            .unwrap();
        w.engine
            .submit_result(&w.rev, &result("rev", "run-a", &d, 1, "ev-live"))
            .await
            .unwrap();
        let plain = uncached(&w);
        let fresh = cached_run(&w).await;
        // One nanosecond before the limit the cached answer still holds.
        w.engine
            .set_manual_time(&ts("2026-11-30T12:08:59.999999999Z"))
            .await
            .unwrap();
        let before = hits(&w);
        let still = same_as_uncached(&w, &plain).await;
        assert_eq!(hits(&w), before + 1);
        assert_eq!(still.bytes, fresh.bytes);
        // At the limit the evidence is stale: another evaluation, as without the cache.
        w.engine
            .set_manual_time(&ts("2026-11-30T12:09:00Z"))
            .await
            .unwrap();
        let stale = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(hits(&w), before + 1, "not answered from the cache");
        assert!(stale.inserted);
        assert_ne!(stale.decision.evaluation_key, fresh.decision.evaluation_key);
        let without = plain.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(without.bytes, stale.bytes);
        // Back before the limit (a manual clock may go back): never the later answer.
        w.engine
            .set_manual_time(&ts("2026-11-30T12:05:00Z"))
            .await
            .unwrap();
        let seq = head_seq(w.engine.store().as_ref()).await;
        let back = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(back.bytes, fresh.bytes);
        assert!(!back.inserted);
        // The older evaluation came back after a later one was recorded: it is recorded again
        // (one record, no new decision), so it is the latest and applies.
        assert_eq!(head_seq(w.engine.store().as_ref()).await, seq + 1);
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert_eq!(
            status.applicable.unwrap().decision.evaluation_key,
            fresh.decision.evaluation_key
        );
        assert_eq!(same_as_uncached(&w, &plain).await.bytes, fresh.bytes);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_dated_in_the_future_counts_once_its_time_comes_as_without_the_cache() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _) = subject_with_evidence(&w, 1, "change A", "pass").await;
        // Observed at 12:10:00, more than 300 s after 12:00:00: future until 12:05:00.
        let ev = dated_evidence(&d, "ev-ahead", "fail", "2026-11-30T12:10:00Z", None);
        w.engine.add_evidence(&w.ci, &[ev]).await.unwrap();
        let plain = uncached(&w);
        let early = cached_run(&w).await;
        w.engine
            .set_manual_time(&ts("2026-11-30T12:04:59Z"))
            .await
            .unwrap();
        let before = hits(&w);
        assert_eq!(same_as_uncached(&w, &plain).await.bytes, early.bytes);
        assert_eq!(hits(&w), before + 1);
        w.engine
            .set_manual_time(&ts("2026-11-30T12:05:00Z"))
            .await
            .unwrap();
        let due = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(hits(&w), before + 1);
        assert_ne!(due.decision.evaluation_key, early.decision.evaluation_key);
        assert_eq!(plain.gate_run(&w.ops, EXEC).await.unwrap().bytes, due.bytes);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_keeps_at_most_its_bound() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        passed(&w, 1, "change A", "run-a").await;
        let small = Engine::with_gate_cache(store, "merge", 1);
        for _ in 0..3 {
            small.gate_run(&w.ops, EXEC).await.unwrap();
        }
        assert_eq!(small.gate_cache_stats(), (2, 1));
        // Another execution's answer takes the only place.
        let other = "ex-2";
        w.engine
            .grant(
                &w.ops,
                "g-coder-2",
                "coder",
                ScopeKind::Execution,
                other,
                Access::Write,
                &ts("2027-01-01T00:00:00Z"),
            )
            .await
            .unwrap();
        let mut s = subject(1, "change B");
        s["execution"]["id"] = json!(other);
        small.put_subject(&w.coder, &s).await.unwrap();
        small.gate_run(&w.ops, other).await.unwrap();
        small.gate_run(&w.ops, other).await.unwrap();
        assert_eq!(
            small.gate_cache_stats(),
            (2, 1),
            "one place, the newest answer"
        );
        small.gate_run(&w.ops, EXEC).await.unwrap();
        small.gate_run(&w.ops, EXEC).await.unwrap();
        assert_eq!(small.gate_cache_stats(), (3, 1));
        let none = uncached(&w);
        for _ in 0..3 {
            none.gate_run(&w.ops, EXEC).await.unwrap();
        }
        assert_eq!(none.gate_cache_stats(), (0, 0));
    })
    .await;
}

/// A small deterministic generator, so a failing sequence can be run again.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_random_writes_and_clock_moves_the_cache_gives_the_same_bytes_as_none() {
    on_both(|store| async move {
        let w = world(store).await;
        let (mut d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        let plain = uncached(&w);
        let mut rng = Lcg(0x5eed_0015);
        let mut now_s: i64 = 0; // seconds after 12:00:00
        let mut generation = 1;
        let mut revision = 1;
        let mut submitted = false;
        let mut n = 0;
        let base = ts("2026-11-30T12:00:00Z").unix_nanos();
        let stamp = |s: i64| {
            verdict_core::contracts::Timestamp::from_unix_nanos(
                base + i128::from(s) * 1_000_000_000,
            )
        };
        for step in 0..40 {
            match rng.next(7) {
                0 | 1 => {
                    // Evidence, some time-sensitive, some dated ahead.
                    n += 1;
                    let outcome = if rng.next(4) == 0 { "fail" } else { "pass" };
                    let observed = now_s - 120 + i64::try_from(rng.next(900)).unwrap();
                    let age = (rng.next(2) == 0).then(|| 30 + rng.next(600));
                    let doc = dated_evidence(
                        &d,
                        &format!("ev-r{n}"),
                        outcome,
                        stamp(observed).as_str(),
                        age,
                    );
                    w.engine.add_evidence(&w.ci, &[doc]).await.unwrap();
                }
                2 | 3 => {
                    // The clock moves, mostly forward, sometimes back.
                    now_s += i64::try_from(rng.next(400)).unwrap() - 40;
                    w.engine.set_manual_time(&stamp(now_s)).await.unwrap();
                }
                4 if !submitted && generation == 1 => {
                    w.engine
                        .submit_result(&w.rev, &result("rev", "run-a", &d, 1, &ev))
                        .await
                        .unwrap();
                    submitted = true;
                }
                5 if revision < 4 => {
                    revision += 1;
                    w.engine
                        .set_policy(&w.ops, &policy(revision))
                        .await
                        .unwrap();
                }
                6 if generation < 3 => {
                    generation += 1;
                    d = w
                        .engine
                        .put_subject(&w.coder, &subject(generation, &format!("g{generation}")))
                        .await
                        .unwrap();
                }
                _ => {}
            }
            // Each engine twice, in an order that changes with the step, so both the storing
            // run, the run that finds it stored and the cached run are compared.
            let mut answers = Vec::new();
            for k in 0..4 {
                let engine = if (k + step) % 2 == 0 {
                    &w.engine
                } else {
                    &plain
                };
                answers.push(engine.gate_run(&w.ops, EXEC).await.unwrap().bytes);
            }
            assert!(
                answers.iter().all(|a| a == &answers[0]),
                "step {step}: {answers:#?}"
            );
        }
        assert!(hits(&w) > 0, "the cache answered some runs");
        let report = w.engine.verify_store(None).await.unwrap();
        assert!(report.is_intact(), "{:?}", report.problems);
    })
    .await;
}
