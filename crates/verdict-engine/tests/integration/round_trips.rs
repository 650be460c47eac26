//! What one evidence append costs in exchanges with the database (`Store::round_trips`), held
//! to its bound on each backend: a counter, so the same on every run, unlike a time. And the
//! way that makes it cheap (the write itself holding the runner's grant, with no reads before
//! it) refuses exactly what checking first refuses, with the same denial and
//! nothing else written.

use crate::common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use verdict_engine::{Engine, Principal};
use verdict_store::{Access, ScopeKind, Store, StoreClock};

/// A store on the system clock (as `verdict serve` runs one) with a producer and a runner, each
/// granted write access on [`EXEC`] until 2099, the runner's token and a stored subject.
struct Served {
    engine: Engine,
    ops: Principal,
    coder: Principal,
    ci: Principal,
    ci_token: String,
    subject: verdict_core::digest::Digest,
}

async fn served(store: Arc<dyn Store>) -> Served {
    let engine = Engine::new(store, "merge");
    let t = engine.init("ops", StoreClock::System).await.unwrap();
    let ops = engine.authenticate(&t).await.unwrap();
    let mut tokens = Vec::new();
    for (name, role) in [("coder", "producer"), ("ci", "runner")] {
        let role = serde_json::from_value(json!(role)).unwrap();
        let token = engine.add_principal(&ops, name, role).await.unwrap();
        tokens.push(token);
    }
    for name in ["coder", "ci"] {
        engine
            .grant(
                &ops,
                &format!("g-{name}"),
                name,
                ScopeKind::Execution,
                EXEC,
                Access::Write,
                &ts("2099-01-01T00:00:00Z"),
            )
            .await
            .unwrap();
    }
    let coder = engine.authenticate(&tokens[0]).await.unwrap();
    let ci = engine.authenticate(&tokens[1]).await.unwrap();
    let subject = engine
        .put_subject(&coder, &subject(1, "change A"))
        .await
        .unwrap();
    Served {
        engine,
        ops,
        coder,
        ci,
        ci_token: tokens[1].clone(),
        subject,
    }
}

/// Runner evidence about `subject`, unique by `n`, as principal `who`.
fn numbered(subject: &verdict_core::digest::Digest, who: &str, n: u64) -> Value {
    let mut ev = evidence(subject, "pass", who, "runner");
    ev["id"] = json!(format!("ev-{who}-{n}"));
    ev["content_digest"] = json!(verdict_core::digest::raw(&n.to_le_bytes()).as_str());
    ev
}

async fn chain_length(store: &Arc<dyn Store>) -> u64 {
    store.audit_head().await.unwrap().map_or(0, |h| h.seq)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_evidence_append_costs_the_round_trips_it_is_held_to() {
    on_both(|store| async move {
        let s = served(store.clone()).await;
        // An engine asks the store who holds a token once: the first time, one read.
        let fresh = Engine::new(store.clone(), "merge");
        let t0 = store.round_trips();
        fresh.authenticate(&s.ci_token).await.unwrap();
        assert_eq!(store.round_trips() - t0, 1);
        // One append first: the handle has looked up the runner's database identity and
        // opened the connections it keeps, as a running server has.
        let ci = s.engine.authenticate(&s.ci_token).await.unwrap();
        s.engine
            .add_evidence(&ci, &[numbered(&s.subject, "ci", 0)])
            .await
            .unwrap();
        let (mut auth, mut append, mut put) = (Vec::new(), Vec::new(), Vec::new());
        for n in 1..=3 {
            let t0 = store.round_trips();
            let ci = s.engine.authenticate(&s.ci_token).await.unwrap();
            let t1 = store.round_trips();
            s.engine
                .add_evidence(&ci, &[numbered(&s.subject, "ci", n)])
                .await
                .unwrap();
            let t2 = store.round_trips();
            store
                .put(
                    &ci.actor(),
                    verdict_store::DocKind::Evidence,
                    &numbered(&s.subject, "ci", 100 + n),
                )
                .await
                .unwrap();
            let t3 = store.round_trips();
            auth.push(t1 - t0);
            append.push(t2 - t1);
            put.push(t3 - t2);
        }
        // The store's own single append is one exchange on both backends.
        assert_eq!(put, [1, 1, 1]);
        // After that, none: who holds a token never changes (its grants are read below).
        assert_eq!(auth, [0, 0, 0]);
        // The write alone: the write holds the runner's grant, PostgreSQL's routine at the
        // database's clock and SQLite's append under its write lock (before, PostgreSQL: the
        // clock, the subject, the grants and each grant's revocation, each through the pool:
        // 9; SQLite: the subject with the grants and their revocations in one call, then the
        // write: 2).
        assert_eq!(append, [1, 1, 1]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runners_evidence_without_a_grant_in_force_is_refused_as_before_and_writes_only_its_denial()
 {
    on_both(|store| async move {
        let s = served(store.clone()).await;
        // A stored piece of evidence, by the runner that holds a grant.
        let stored = numbered(&s.subject, "ci", 1);
        s.engine
            .add_evidence(&s.ci, std::slice::from_ref(&stored))
            .await
            .unwrap();
        // Another subject, of another execution, on which no one holds a grant.
        let mut other = subject(1, "change B");
        other["execution"]["id"] = json!("ex-other");
        s.engine
            .grant(
                &s.ops,
                "g-coder-other",
                "coder",
                ScopeKind::Execution,
                "ex-other",
                Access::Write,
                &ts("2099-01-01T00:00:00Z"),
            )
            .await
            .unwrap();
        let other = s.engine.put_subject(&s.coder, &other).await.unwrap();
        let unknown = verdict_core::digest::raw(b"no such subject");

        // Each refused append: its answer, and the one record it leaves, a denial.
        let refused = |who: Principal, doc: Value, code: &'static str, says: &'static str| {
            let (engine, store) = (s.engine.clone(), store.clone());
            async move {
                let before = chain_length(&store).await;
                let denials = store.denials_of(who.name().as_str()).await.unwrap().len();
                let e = engine.add_evidence(&who, &[doc]).await.unwrap_err();
                assert_eq!(e.code(), code, "{e}");
                assert!(e.to_string().contains(says), "{e}");
                let after = chain_length(&store).await;
                let now = store.denials_of(who.name().as_str()).await.unwrap().len();
                if code == "permission_denied" {
                    assert_eq!((after - before, now - denials), (1, 1), "{e}");
                } else {
                    assert_eq!((after - before, now - denials), (0, 0), "{e}");
                }
            }
        };
        // No grant on the subject's execution: the runner of EXEC writing about ex-other.
        let out_of_scope = "no grant in force on its execution or mission covers it";
        refused(
            s.ci.clone(),
            numbered(&other, "ci", 2),
            "permission_denied",
            out_of_scope,
        )
        .await;
        // A subject that is not stored: refused in the same words, and recorded, so the
        // refusal does not tell which subjects exist.
        refused(
            s.ci.clone(),
            numbered(&unknown, "ci", 3),
            "permission_denied",
            out_of_scope,
        )
        .await;
        // Evidence already stored is no way around a grant: after the revocation, appending
        // it again is refused like anything new.
        s.engine
            .revoke(&s.ops, "g-ci", "rotated out")
            .await
            .unwrap();
        refused(
            s.ci.clone(),
            stored.clone(),
            "permission_denied",
            out_of_scope,
        )
        .await;
        refused(
            s.ci.clone(),
            numbered(&s.subject, "ci", 4),
            "permission_denied",
            out_of_scope,
        )
        .await;
    })
    .await;
}
