//! Authority tried from outside: the store's clock, `init` on an initialised store. Each
//! attack is refused, writes nothing but its denial, and leaves the chain intact (checked by
//! `on_both`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_core::contracts::{HumanVerdict, Role};
use verdict_store::{About, Actor, ActorRole, DocKind, ProblemKind, StoreClock};

async fn chain_length(w: &World) -> u64 {
    w.engine
        .store()
        .audit_head()
        .await
        .unwrap()
        .map_or(0, |h| h.seq)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_name_that_could_pass_for_another_is_refused_where_it_is_made() {
    on_both(|store| async move {
        // Each name reads as an ASCII one, or holds a character that is not ASCII: a Cyrillic
        // `о`, a Greek omicron, a fullwidth `ｍ`, a hyphen that is not `-`, an accented Latin
        // letter, a plain space.
        let refused = [
            ("\u{43e}perator", "U+043E, Cyrillic at character 1"),
            ("t\u{3bf}ken", "U+03BF, Greek at character 2"),
            ("ad\u{ff4d}in", "U+FF4D, Fullwidth Latin at character 3"),
            ("rev\u{2010}2", "U+2010 at character 4"),
            ("h\u{e9}l\u{e8}ne", "U+00E9, Latin at character 2"),
            ("agent coder", "U+0020 at character 6"),
        ];
        // The first operator, made by `init` on the empty store, is held to it too.
        let fresh = verdict_engine::Engine::new(store.clone(), "merge");
        for (bad, why) in &refused[..2] {
            let e = fresh.init(bad, StoreClock::Manual).await.unwrap_err();
            assert_eq!(e.code(), "invalid_input", "{e}");
            let message = e.to_string();
            assert!(message.contains("principal name"), "{message}");
            assert!(message.contains(why), "{message}");
        }
        assert!(store.audit_head().await.unwrap().is_none());
        let w = world(store).await;
        let before = chain_length(&w).await;
        for (bad, why) in refused {
            let e = w
                .engine
                .add_principal(&w.ops, bad, Role::Verifier)
                .await
                .unwrap_err();
            assert_eq!(e.code(), "invalid_input", "{bad:?}: {e}");
            let message = e.to_string();
            assert!(message.contains("principal name"), "{message}");
            assert!(message.contains(why), "{message}");
            assert!(w.engine.store().principal(bad).await.unwrap().is_none());
        }
        assert_eq!(chain_length(&w).await, before);
        // The plain names still work, marks included.
        for ok in ["operator-2", "a.b_c@example.org", "x+y"] {
            w.engine
                .add_principal(&w.ops, ok, Role::Human)
                .await
                .unwrap();
        }
        // A name stored before the rule (written as the operator, around the engine) is still
        // read: its token authenticates and the operator lists it.
        let old = "\u{43e}ld-reviewer";
        store_old_principal(
            w.engine.store().as_ref(),
            &verdict_store::PrincipalRecord {
                name: old.parse().unwrap(),
                role: Role::Human,
                token_sha256: verdict_store::token_sha256("vdt_old"),
            },
        )
        .await;
        let p = w.engine.authenticate("vdt_old").await.unwrap();
        assert_eq!(p.name().as_str(), old);
        let listed = w.engine.list_principals(&w.ops).await.unwrap();
        assert!(listed.iter().any(|v| v.name.as_str() == old), "{listed:?}");
    })
    .await;
}

/// Stores `record`, a principal whose name was stored before names were held to a rule: on
/// SQLite through the store as the operator, around the engine; on PostgreSQL, whose database
/// refuses such a name from every identity since schema 35, the way only its superuser (with no
/// role set, not bound by the checks) still can: the routine called on its own connection.
async fn store_old_principal(
    store: &dyn verdict_store::Store,
    record: &verdict_store::PrincipalRecord,
) {
    use sqlx::Connection as _;
    let described = store.describe();
    if !described.starts_with("postgres") {
        store
            .add_principal(&Actor::new("ops", ActorRole::Operator), record)
            .await
            .unwrap();
        return;
    }
    let body = String::from_utf8(verdict_core::canonical::to_vec(
        &serde_json::to_value(record).unwrap(),
    ))
    .unwrap();
    let digest = verdict_store::records::row_digest(
        verdict_store::Table::Principals.domain(),
        body.as_bytes(),
    );
    // The store describes itself as its URL, followed by its role prefix.
    let url = described.split(" (").next().unwrap();
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let inserted: Option<bool> = sqlx::query_scalar(
        "SELECT r_inserted FROM verdict.put_one_principals('ops', 'operator', $1, $2, $3, NULL)",
    )
    .bind(record.name.as_str())
    .bind(digest.as_str())
    .bind(&body)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    assert_eq!(inserted, Some(true));
}

/// A new principal whose name reads like a stored one's (`0perator` beside `operator`: the
/// same look-alike skeleton) is refused as `invalid_input` naming the stored principal, and
/// nothing is written; a name that reads differently is taken. A name stored before the rule
/// that reads like another is still read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_name_that_reads_like_a_stored_one_is_refused() {
    on_both(|store| async move {
        let w = world(store).await;
        for name in ["operator", "wendy", "modem", "ci-runner"] {
            w.engine
                .add_principal(&w.ops, name, Role::Human)
                .await
                .unwrap();
        }
        let before = chain_length(&w).await;
        for (bad, like) in [
            ("0perator", "operator"),
            ("OPERATOR", "operator"),
            ("0PERAT0R", "operator"),
            ("c1", "ci"),
            ("cI", "ci"),
            ("a1ice", "alice"),
            ("aIice", "alice"),
            ("c0der", "coder"),
            ("vvendy", "wendy"),
            ("rnodem", "modem"),
            ("m0dern", "modem"),
            ("ci_runner", "ci-runner"),
            ("ci.runner", "ci-runner"),
            ("0p5", "ops"),
        ] {
            let e = w
                .engine
                .add_principal(&w.ops, bad, Role::Operator)
                .await
                .unwrap_err();
            assert_eq!(e.code(), "invalid_input", "{bad}: {e}");
            let message = e.to_string();
            assert!(
                message.contains(&format!("reads like principal \"{like}\"")),
                "{bad}: {message}"
            );
            assert!(w.engine.store().principal(bad).await.unwrap().is_none());
        }
        assert_eq!(chain_length(&w).await, before);
        // Honest names that read differently are taken.
        for ok in ["operator-2", "operators", "rev3", "alice.b"] {
            w.engine
                .add_principal(&w.ops, ok, Role::Human)
                .await
                .unwrap();
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_on_an_initialised_store_is_refused_and_writes_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        let before = chain_length(&w).await;
        for (name, clock) in [("mallory", StoreClock::System), ("ops", StoreClock::Manual)] {
            let e = w.engine.init(name, clock).await.unwrap_err();
            assert_eq!(e.code(), "conflict", "{e}");
        }
        assert!(
            w.engine
                .store()
                .principal("mallory")
                .await
                .unwrap()
                .is_none()
        );
        // Not even the store's own actor can choose the clock again.
        let system = Actor::new(verdict_engine::ENGINE_PRINCIPAL, ActorRole::Operator);
        assert!(
            w.engine
                .store()
                .establish_clock(&system, StoreClock::System)
                .await
                .is_err()
        );
        assert_eq!(chain_length(&w).await, before);
        assert_eq!(w.engine.store().clock().await.unwrap(), StoreClock::Manual);
    })
    .await;
}

/// A verifier reads its subject: a write grant on the execution, which an operator may give it,
/// lets it write nothing a verifier may not. Its subject, its check evidence, a request, a
/// cancellation and a queue's jobs are each refused as outside its role, and each refusal
/// appends only its denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_with_a_write_grant_still_writes_only_its_results() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _, req) = prepared(&w, 1, "change A", "run-a").await;
        grant_on_exec(&w, "g-rev-write", "rev", verdict_store::Access::Write).await;
        let mut own = subject(2, "the verifier's own change");
        own["producer"]["principal"] = json!("rev");
        let ev = evidence(&d, "pass", "rev", "verifier");
        let denied = |e: verdict_engine::EngineError| {
            assert_eq!(e.code(), "permission_denied", "{e}");
        };
        let mut before = chain_length(&w).await;
        let mut tried = 0;
        for outcome in [
            w.engine.put_subject(&w.rev, &own).await.map(|_| ()),
            w.engine.add_evidence(&w.rev, &[ev]).await.map(|_| ()),
            w.engine
                .create_request(&w.rev, EXEC, &json!({}))
                .await
                .map(|_| ()),
            w.engine
                .cancel_execution(&w.rev, EXEC, "mine now")
                .await
                .map(|_| ()),
            w.engine
                .enqueue_request_jobs(&w.rev, &req, None)
                .await
                .map(|_| ()),
        ] {
            denied(outcome.unwrap_err());
            tried += 1;
        }
        // Each refusal appended one row: its denial.
        let after = chain_length(&w).await;
        assert_eq!(after - before, tried);
        before = after;
        assert_eq!(current_subject(&w).await, d);
        assert!(
            w.engine
                .status(&w.ops, EXEC)
                .await
                .unwrap()
                .cancelled
                .is_none()
        );
        assert_eq!(chain_length(&w).await, before);
    })
    .await;
}

/// Creating the first operator is the only act nobody authenticates, and only on an empty
/// store: eight `init`s started together on one empty store (each its own engine, interleaving
/// their writes) leave exactly one operator, the one whose `init` answered with a token; every
/// other is refused as a conflict and wrote nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_inits_racing_on_an_empty_store_exactly_one_creates_an_operator() {
    on_both(|store| async move {
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let engine = verdict_engine::Engine::new(store.clone(), "merge");
                tokio::spawn(async move {
                    let name = format!("ops-{i}");
                    (name.clone(), engine.init(&name, StoreClock::System).await)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            let (name, outcome) = t.await.unwrap();
            match outcome {
                Ok(token) => winners.push((name, token)),
                Err(e) => assert_eq!(e.code(), "conflict", "{name}: {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "{winners:?}");
        let (name, token) = &winners[0];
        let listed = store.principals(0, 100).await.unwrap();
        assert_eq!(
            listed.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            [name.as_str()]
        );
        let engine = verdict_engine::Engine::new(store.clone(), "merge");
        let ops = engine.authenticate(token).await.unwrap();
        assert_eq!(ops.role(), Role::Operator);
        // Two writes: the clock, then the operator.
        assert_eq!(store.audit_head().await.unwrap().unwrap().seq, 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_on_the_system_clock_refuses_a_time_and_uses_its_own() {
    on_both(|store| async move {
        let engine = verdict_engine::Engine::new(store.clone(), "merge");
        engine.init("ops", StoreClock::System).await.unwrap();
        let e = store.set_manual_time(&ts("2000-01-01T00:00:00Z")).await;
        assert!(e.unwrap_err().to_string().contains("system clock"));
        // The store's time is the real one, not the time that was offered.
        let now = engine.now().await.unwrap();
        assert!(now > ts("2026-01-01T00:00:00Z"), "{now}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_time_set_before_a_revocation_brings_the_grant_back() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, ev, _) = prepared(&w, 1, "change A", "run-a").await;
        for g in ["g-rev", "g-alice"] {
            w.engine.revoke(&w.ops, g, "rotated out").await.unwrap();
        }
        // The clock is moved back to before the revocation: the revocation still holds,
        // because the store orders it before every act it records after it.
        let store = w.engine.store();
        store
            .set_manual_time(&ts("2026-11-30T11:00:00Z"))
            .await
            .unwrap();
        let sub = w
            .engine
            .submit_result(&w.rev, &result("rev", "run-a", &d, 1, &ev))
            .await
            .unwrap();
        assert!(!sub.counted);
        let e = w
            .engine
            .decide(
                &w.alice,
                EXEC,
                HumanVerdict::Approve,
                "backdated",
                &reviewed(&w).await,
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        let denials = store.denials_of("alice").await.unwrap();
        assert_eq!(denials.len(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_admission_leaves_no_note() {
    on_both(|store| async move {
        let w = world(store).await;
        prepared(&w, 1, "change A", "run-a").await;
        let notes = w.engine.admission_notes(&w.ops, EXEC).await.unwrap().len();
        let before = chain_length(&w).await;
        // run-a belongs to rev; admitting rev2 under the same run id is refused.
        let req = request(&w, json!({})).await;
        let after_request = chain_length(&w).await;
        assert!(after_request > before);
        let e = w
            .engine
            .admit(&w.ops, &req, "rev2", "reviewer", "run-a")
            .await
            .unwrap_err();
        assert!(e.to_string().contains("already stored"), "{e}");
        assert_eq!(
            w.engine.admission_notes(&w.ops, EXEC).await.unwrap().len(),
            notes
        );
        assert_eq!(chain_length(&w).await, after_request);
        let run = w.engine.store().run("run-a").await.unwrap().unwrap();
        assert_eq!(run.admission.verifier.as_str(), "rev");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_the_gate_would_refuse_never_becomes_current() {
    on_both(|store| async move {
        let w = world(store).await;
        let head = w.engine.list_gates(&w.ops).await.unwrap();
        let before = chain_length(&w).await;
        let rule = json!({"id": "r-1", "when": "true", "outcome": "pass", "reason": "always"});
        for (field, value) in [
            ("on_inconclusive", json!("pass")),
            ("on_contradiction", json!("pass")),
            ("rules", json!([rule])),
        ] {
            let mut p = policy(2);
            p[field] = value;
            let e = w.engine.set_policy(&w.ops, &p).await.unwrap_err();
            assert_eq!(e.code(), "invalid_input", "{field}: {e}");
            assert!(e.to_string().contains(field), "{field}: {e}");
        }
        assert_eq!(w.engine.list_gates(&w.ops).await.unwrap(), head);
        assert_eq!(chain_length(&w).await, before);
        // The same policy without the pass is accepted: the refusal is about the pass.
        let mut p = policy(2);
        p["on_inconclusive"] = json!("human_required");
        w.engine.set_policy(&w.ops, &p).await.unwrap();
    })
    .await;
}

/// Issue 13, attack 8: a gate-role writer stored a pass with no evidence, `status` took it
/// for applicable and `audit verify` said the store was intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_replays_every_decision_and_reports_one_the_gate_did_not_make() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-a").await;
        assert!(w.engine.verify_store(None).await.unwrap().is_intact());
        let decisions = w
            .engine
            .store()
            .list(DocKind::Decision, &About::Execution(EXEC.into()))
            .await
            .unwrap();
        let mut forged = decisions[0].value().unwrap();
        forged["evaluation_key"] = json!(DEF);
        forged["criteria"] = json!([]);
        let store = w.engine.store();
        if store.describe().starts_with("postgres") {
            // On PostgreSQL (schema 13) the gate's routine refuses a decision that comes
            // without its evaluation record in the same transaction.
            let e = store
                .put(&Actor::gate("mallory"), DocKind::Decision, &forged)
                .await
                .unwrap_err();
            assert!(
                e.to_string().contains("only with its evaluation record"),
                "{e}"
            );
        }
        // The forgery the database cannot refuse: a record copied from the true one, under
        // the forged key, written with the decision in one transaction, under the name of a
        // principal that may gate (since schema 14 a name no principal has is refused).
        let real_key = decisions[0]
            .decode::<verdict_core::contracts::GateDecision>()
            .unwrap()
            .evaluation_key
            .unwrap();
        let mut record = store.evaluations(&real_key).await.unwrap()[0]
            .value()
            .unwrap();
        record["evaluation_key"] = json!(DEF);
        if store.describe().starts_with("postgres") {
            let before = chain_length(&w).await;
            let e = store
                .put_batch(
                    &Actor::gate("mallory"),
                    &[
                        (DocKind::Evaluation, record.clone()),
                        (DocKind::Decision, forged.clone()),
                    ],
                )
                .await
                .unwrap_err();
            assert!(
                e.to_string()
                    .contains("only under the name of a stored operator"),
                "{e}"
            );
            assert_eq!(chain_length(&w).await, before);
        }
        let row = store_as_gate(&w, record, forged).await;
        // Its hashes agree with the chain: only replaying it shows the Gate never made it.
        assert!(
            w.engine
                .store()
                .verify_audit(None)
                .await
                .unwrap()
                .is_intact()
        );
        let report = w.engine.verify_store(None).await.unwrap();
        assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
        let p = &report.problems[0];
        assert_eq!(p.kind, ProblemKind::Replay);
        assert_eq!((p.seq, p.key.as_deref()), (Some(row.seq), Some(DEF)));
    })
    .await;
}

/// Stores `decision` with its evaluation `record` in one transaction, as the gate's identity
/// can around the engine, under the name of a principal that may gate; the decision's row.
async fn store_as_gate(
    w: &World,
    record: serde_json::Value,
    decision: serde_json::Value,
) -> verdict_store::Stored {
    w.engine
        .store()
        .put_batch(
            &Actor::gate("ops"),
            &[(DocKind::Evaluation, record), (DocKind::Decision, decision)],
        )
        .await
        .unwrap()
        .pop()
        .unwrap()
}

/// The items the Gate reads for [`EXEC`] now, and what it makes of them at `at`: what anyone
/// who reads them can compute, the Gate being pure.
async fn gate_at(
    w: &World,
    at: &verdict_core::contracts::Timestamp,
) -> (
    verdict_engine::Collected,
    verdict_core::contracts::GateDecision,
) {
    let collected = w.engine.collect(&w.ops, EXEC).await.unwrap();
    let decision = verdict_core::gate::evaluate_value(&collected.bundle(at).unwrap());
    (collected, decision)
}

/// A forged decision as the gate's identity can store it: a pass over the Gate's own
/// `decision`, under `key`, with `record` (the Gate's true record, moved to `key`); its seq.
async fn forge(
    w: &World,
    decision: &serde_json::Value,
    record: &serde_json::Value,
    key: &str,
) -> u64 {
    let mut forged = decision.clone();
    forged["outcome"] = json!("pass");
    forged["reasons"] = json!([]);
    forged["evaluation_key"] = json!(key);
    let mut record = record.clone();
    record["evaluation_key"] = json!(key);
    store_as_gate(w, record, forged).await.seq
}

/// Issue 13, attack 8 taken further: a gate identity stores a pass over a subject the Gate
/// does not pass, with the true evaluation record moved to the forged key, so that the evidence
/// set is the current one and the forged evaluation is the latest. `status` never shows it as
/// applicable, the ledger never counts it (open or closed attempt), and `audit verify` names
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_the_gate_did_not_make_never_applies_nor_counts() {
    use verdict_engine::{NotApplicable, ledger::AttemptClass};
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "change A", "fail").await;
        let honest = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(honest.decision.outcome.as_str(), "pass");
        let key = honest.decision.evaluation_key.clone().unwrap();
        let record = w.engine.store().evaluations(&key).await.unwrap()[0]
            .value()
            .unwrap();
        let decision: serde_json::Value = serde_json::from_str(&honest.bytes).unwrap();
        let seq = forge(&w, &decision, &record, DEF).await;

        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none(), "{:?}", status.applicable);
        let latest = status.latest.unwrap();
        assert_eq!(
            (latest.seq, latest.decision.outcome.as_str()),
            (seq, "pass")
        );
        assert_eq!(latest.not_applicable, [NotApplicable::NotReproduced]);
        let attempts = w.engine.ledger_attempts(&w.ops, EXEC).await.unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].class, AttemptClass::Stale);

        // A closed attempt is judged without the checks only an open one needs; the replay is
        // not one of them.
        w.engine
            .put_subject(&w.coder, &subject(2, "change B"))
            .await
            .unwrap();
        let attempts = w.engine.ledger_attempts(&w.ops, EXEC).await.unwrap();
        assert_eq!(attempts.len(), 2);
        assert_eq!(
            (attempts[0].generation, attempts[0].class),
            (1, AttemptClass::Stale)
        );
        let report = w.engine.verify_store(None).await.unwrap();
        assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
        assert_eq!(report.problems[0].seq, Some(seq));
    })
    .await;
}

/// The same forgery made ahead of the Gate, under the evaluation key its next run computes
/// (anyone may compute it: the Gate is pure and the items are readable to the gate's
/// identity). `gate run` does not take the stored decision for its own: it fails with
/// `replay_mismatch` and writes nothing, and `status` does not apply the forgery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_run_never_answers_with_a_decision_stored_ahead_of_it_under_its_key() {
    use verdict_engine::NotApplicable;
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "change A", "fail").await;
        let (collected, decision) = gate_at(&w, &now()).await;
        assert_ne!(decision.outcome.as_str(), "pass");
        let key = decision.evaluation_key.clone().unwrap();
        let digests = |rows: &[verdict_store::Stored]| {
            let mut d: Vec<_> = rows.iter().map(|r| r.digest.clone()).collect();
            d.sort();
            d
        };
        let record = verdict_store::EvaluationRecord {
            schema: verdict_store::EVALUATION_SCHEMA.to_owned(),
            evaluation_key: key.clone(),
            subject_digest: collected.subject.digest.clone(),
            policy_digest: collected.policy.digest.clone(),
            now: now(),
            evidence: digests(&collected.evidence),
            verifications: digests(&collected.verifications),
            human_decisions: digests(&collected.human_decisions),
            prior_findings: Vec::new(),
        };
        let seq = forge(
            &w,
            &serde_json::to_value(&decision).unwrap(),
            &serde_json::to_value(&record).unwrap(),
            key.as_str(),
        )
        .await;

        let before = chain_length(&w).await;
        let e = w.engine.gate_run(&w.ops, EXEC).await.unwrap_err();
        assert_eq!(e.code(), "replay_mismatch", "{e}");
        assert_eq!(chain_length(&w).await, before);
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none(), "{:?}", status.applicable);
        let latest = status.latest.unwrap();
        assert_eq!(latest.seq, seq);
        assert_eq!(latest.not_applicable, [NotApplicable::NotReproduced]);
        let report = w.engine.verify_store(None).await.unwrap();
        assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
        assert_eq!(report.problems[0].seq, Some(seq));

        // Another evaluation recorded since (here a second forgery), so that the forged one is
        // not the latest: the run would record its evaluation again; it still writes nothing.
        let again = forge(
            &w,
            &serde_json::to_value(&decision).unwrap(),
            &serde_json::to_value(&record).unwrap(),
            DEF,
        )
        .await;
        let before = chain_length(&w).await;
        let e = w.engine.gate_run(&w.ops, EXEC).await.unwrap_err();
        assert_eq!(e.code(), "replay_mismatch", "{e}");
        assert_eq!(chain_length(&w).await, before);
        let report = w.engine.verify_store(None).await.unwrap();
        let seqs: Vec<_> = report.problems.iter().map(|p| p.seq).collect();
        assert_eq!(seqs, [Some(seq), Some(again)], "{:#?}", report.problems);

        // Once the items move, the Gate's next key is free and its own decision applies.
        let d = current_subject(&w).await;
        w.engine
            .add_evidence(&w.ci, &[evidence(&d, "pass", "ci", "runner")])
            .await
            .unwrap();
        let run = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert_eq!(
            status.applicable.unwrap().decision.evaluation_key,
            run.decision.evaluation_key
        );
    })
    .await;
}

/// A decision the Gate did make, but at a time the store has not reached, stored with a record
/// of that time by the gate's identity: a time after the store's (now, and when it stored the
/// record) would let items dated in the future count, so it does not apply (`not_reproduced`)
/// until the store's clock reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_recorded_at_a_time_the_store_has_not_reached_does_not_apply() {
    use verdict_engine::NotApplicable;
    on_both(|store| async move {
        let w = world(store).await;
        // Evidence dated far ahead: the Gate holds it as from the future now, not then.
        let later = ts("2099-01-01T00:00:00Z");
        let d = w
            .engine
            .put_subject(&w.coder, &subject(1, "change A"))
            .await
            .unwrap();
        let mut ev = evidence(&d, "pass", "ci", "runner");
        ev["observed_at"] = json!(later.as_str());
        w.engine.add_evidence(&w.ci, &[ev]).await.unwrap();
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        let honest = w
            .engine
            .status(&w.ops, EXEC)
            .await
            .unwrap()
            .applicable
            .unwrap();
        let (_, decision) = gate_at(&w, &later).await;
        let key = decision.evaluation_key.clone().unwrap();
        assert_ne!(Some(&key), honest.decision.evaluation_key.as_ref());
        let mut record = w
            .engine
            .store()
            .evaluations(honest.decision.evaluation_key.as_ref().unwrap())
            .await
            .unwrap()[0]
            .value()
            .unwrap();
        record["now"] = json!(later.as_str());
        record["evaluation_key"] = json!(key.as_str());
        let seq = store_as_gate(&w, record, serde_json::to_value(&decision).unwrap())
            .await
            .seq;
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(status.applicable.is_none(), "{:?}", status.applicable);
        let latest = status.latest.unwrap();
        assert_eq!(latest.seq, seq);
        assert_eq!(latest.not_applicable, [NotApplicable::NotReproduced]);
        // At that time it is the Gate's word.
        w.engine.store().set_manual_time(&later).await.unwrap();
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert_eq!(status.applicable.unwrap().seq, seq);
    })
    .await;
}

/// Issue 13: the engine writes nothing as its own principal on a caller's behalf any more:
/// `init` (the clock and the first operator) is the operator's own act, an attestation and
/// its key record are the attesting operator's, and a verifier admitting itself under a run cap
/// takes the request's admission lease itself. Only denials are written under the engine's
/// name, in the system role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_attestations_and_a_capped_self_admission_are_written_as_the_caller() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 0, "change A", "run-1").await;
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        let eval = status.applicable.unwrap().decision.evaluation_key.unwrap();
        let signer = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
        w.engine
            .attest(&w.ops, &eval, &signer, false)
            .await
            .unwrap();
        assert!(
            w.engine
                .signing_key_registered(&w.ops, &signer.verifying_key())
                .await
                .unwrap()
        );
        assert_eq!(w.engine.attestations(&w.ops, EXEC).await.unwrap().len(), 1);
        let req = request(&w, json!({"max_runs": 3})).await;
        w.engine
            .admit(&w.rev2, &req, "rev2", "reviewer", "run-capped")
            .await
            .unwrap();
        // A refusal still writes its denial, under the engine's name in the system role.
        assert!(
            w.engine
                .attest(&w.coder, &eval, &signer, false)
                .await
                .is_err()
        );
        let events = w.engine.store().audit_events(0, 10_000).await.unwrap();
        let writers = |principal: &str| {
            events
                .iter()
                .filter(|e| e.principal == principal)
                .map(|e| (e.table.as_str(), e.role.as_str()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            writers(verdict_engine::ENGINE_PRINCIPAL),
            [("denials", "system")]
        );
        assert_eq!(
            events[..2]
                .iter()
                .map(|e| (e.table.as_str(), e.principal.as_str(), e.role.as_str()))
                .collect::<Vec<_>>(),
            [
                ("pointer_changes", "ops", "operator"),
                ("principals", "ops", "operator")
            ]
        );
        // The lease taken and released, and the admission, are the verifier's own.
        let rev2 = writers("rev2");
        assert_eq!(
            rev2.iter()
                .filter(|w| **w == ("pointer_changes", "verifier"))
                .count(),
            2,
            "{rev2:?}"
        );
    })
    .await;
}

/// A principal with no grant on an execution does not gate it: the refusal writes only its
/// denial (on PostgreSQL the database would refuse the decision under its name as well).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_with_no_grant_on_an_execution_does_not_gate_it() {
    on_both(|store| async move {
        let w = world(store).await;
        subject_with_evidence(&w, 1, "change A", "pass").await;
        let token = w
            .engine
            .add_principal(&w.ops, "stranger", verdict_core::contracts::Role::Verifier)
            .await
            .unwrap();
        let stranger = w.engine.authenticate(&token).await.unwrap();
        let before = chain_length(&w).await;
        let e = w.engine.gate_run(&stranger, EXEC).await.unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        assert_eq!(chain_length(&w).await, before + 1);
        let denials = w.engine.store().denials_of("stranger").await.unwrap();
        assert_eq!(denials.len(), 1);
        // Anyone holding a grant on it, and any operator, still may.
        w.engine.gate_run(&w.coder, EXEC).await.unwrap();
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
    })
    .await;
}

/// The current subject of [`EXEC`].
async fn head_of(w: &World) -> verdict_core::digest::Digest {
    w.engine
        .execution_head(&w.ops, EXEC)
        .await
        .unwrap()
        .unwrap()
        .subject_digest
}

/// A producer with a second producer's execution as its target: `coder3`, holding a write
/// grant on mission `m3` only.
async fn second_producer(w: &World) -> verdict_engine::Principal {
    let token = w
        .engine
        .add_principal(&w.ops, "coder3", verdict_core::contracts::Role::Producer)
        .await
        .unwrap();
    w.engine
        .grant(
            &w.ops,
            "g-m3",
            "coder3",
            verdict_store::ScopeKind::Mission,
            "m3",
            verdict_store::Access::Write,
            &ts("2027-01-01T00:00:00Z"),
        )
        .await
        .unwrap();
    w.engine.authenticate(&token).await.unwrap()
}

/// A subject of [`EXEC`] by `coder3`, naming `mission` when given.
fn subject_of_coder3(generation: u64, diff: &str, mission: Option<&str>) -> serde_json::Value {
    let mut s = subject(generation, diff);
    s["producer"]["principal"] = json!("coder3");
    if let Some(m) = mission {
        s["mission"] = json!(m);
    }
    s
}

/// A producer holding a write grant on its own mission names that mission in a subject for
/// another producer's execution: refused with a denial, the execution stays where it was.
/// Handed the execution by a grant on its id, it may put the next subject, but never one that
/// changes the execution's mission. And a producer's check evidence needs a write grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mission_grant_does_not_take_over_another_producers_execution() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d1, _) = subject_with_evidence(&w, 1, "change A", "pass").await;
        let coder3 = second_producer(&w).await;
        let before = chain_length(&w).await;
        let e = w
            .engine
            .put_subject(&coder3, &subject_of_coder3(2, "mine now", Some("m3")))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        // Only the denial is written; the execution did not move.
        assert_eq!(chain_length(&w).await, before + 1);
        assert_eq!(head_of(&w).await, d1);
        // Evidence about the other producer's subject is refused too.
        let ev = evidence(&d1, "pass", "coder3", "producer");
        let e = w.engine.add_evidence(&coder3, &[ev]).await.unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        assert_eq!(chain_length(&w).await, before + 2);

        // A grant on the execution itself hands it over, but its mission stays.
        w.engine
            .grant(
                &w.ops,
                "g-ex-coder3",
                "coder3",
                verdict_store::ScopeKind::Execution,
                EXEC,
                verdict_store::Access::Write,
                &ts("2027-01-01T00:00:00Z"),
            )
            .await
            .unwrap();
        let before = chain_length(&w).await;
        for who in [&coder3, &w.ops] {
            let e = w
                .engine
                .put_subject(who, &subject_of_coder3(2, "mine now", Some("m3")))
                .await
                .unwrap_err();
            assert_eq!(e.code(), "conflict", "{e}");
            assert!(e.to_string().contains("mission"), "{e}");
        }
        assert_eq!(chain_length(&w).await, before);
        let d2 = w
            .engine
            .put_subject(&coder3, &subject_of_coder3(2, "handed over", None))
            .await
            .unwrap();
        assert_eq!(head_of(&w).await, d2);

        // The first producer's evidence needs its grant in force like a runner's.
        w.engine
            .revoke(&w.ops, "g-coder", "moved on")
            .await
            .unwrap();
        let before = chain_length(&w).await;
        let ev = evidence(&d1, "fail", "coder", "producer");
        let e = w.engine.add_evidence(&w.coder, &[ev]).await.unwrap_err();
        assert_eq!(e.code(), "permission_denied", "{e}");
        assert_eq!(chain_length(&w).await, before + 1);
    })
    .await;
}

/// Evidence names who produced it. A producer posting evidence that names the runner (to have
/// it counted as the runner's), or a runner posting evidence that names another runner or the
/// producer, acts as someone else: refused as `permission_denied`, with exactly its denial
/// appended, on the runner's one-write path and in a batch alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_naming_a_producer_other_than_its_writer_is_refused_as_acting_as_them() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _) = subject_with_evidence(&w, 1, "change A", "pass").await;
        let cases = [
            (&w.coder, vec![evidence(&d, "pass", "ci", "runner")]),
            (&w.ci, vec![evidence(&d, "pass", "coder", "producer")]),
            (&w.ci, vec![evidence(&d, "pass", "ci-2", "runner")]),
            (&w.ci, vec![evidence(&d, "pass", "ci", "producer")]),
            (
                &w.ci,
                vec![
                    evidence(&d, "pass", "ci", "runner"),
                    evidence(&d, "fail", "coder", "producer"),
                ],
            ),
        ];
        for (who, docs) in cases {
            let before = chain_length(&w).await;
            let e = w.engine.add_evidence(who, &docs).await.unwrap_err();
            assert_eq!(e.code(), "permission_denied", "{e}");
            assert!(e.to_string().contains("says it was produced by"), "{e}");
            assert_eq!(chain_length(&w).await, before + 1);
        }
    })
    .await;
}

/// Within one generation the execution goes from A to B; putting A again is refused, as a
/// conflict that names A, through the engine and through the store, and nothing is written.
/// Putting B again, the current subject, is taken and appends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_never_returns_to_a_subject_it_left() {
    on_both(|store| async move {
        let w = world(store).await;
        let (a, _) = subject_with_evidence(&w, 1, "change A", "pass").await;
        let b = w
            .engine
            .put_subject(&w.coder, &subject(1, "change B"))
            .await
            .unwrap();
        let before = chain_length(&w).await;
        for who in [&w.coder, &w.ops] {
            let e = w
                .engine
                .put_subject(who, &subject(1, "change A"))
                .await
                .unwrap_err();
            assert_eq!(e.code(), "conflict", "{e}");
            assert!(e.to_string().contains(a.as_str()), "{e}");
        }
        let at_b = verdict_store::ExecutionHead {
            subject_digest: b.clone(),
            generation: 1,
        };
        for actor in [
            Actor::new("coder", ActorRole::Producer),
            Actor::new("ops", ActorRole::Operator),
        ] {
            let e = w
                .engine
                .store()
                .set_current_subject(&actor, EXEC, Some(&at_b), &a)
                .await
                .unwrap_err();
            assert!(e.to_string().contains("only moves forward"), "{e}");
        }
        assert_eq!(head_of(&w).await, b);
        // The current subject put again: taken, nothing appended.
        let again = w
            .engine
            .put_subject(&w.coder, &subject(1, "change B"))
            .await
            .unwrap();
        assert_eq!(again, b);
        assert_eq!(chain_length(&w).await, before);
    })
    .await;
}
