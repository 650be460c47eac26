//! Authentication remembered by the engine: a token the store named once is answered without
//! asking it again, and that can never let anyone do what the store no longer allows: a grant
//! revoked is refused on the very next call, and a token no principal holds is looked up (and
//! its denial recorded) every time. On both backends.

use crate::common::*;
use verdict_core::contracts::Role;
use verdict_store::{Access, ScopeKind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_token_is_not_asked_again_yet_a_revoked_grant_is_refused_on_the_next_call() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        w.engine
            .put_subject(&w.coder, &subject(1, "d1"))
            .await
            .unwrap();
        let token = w
            .engine
            .add_principal(&w.ops, "reader", Role::Verifier)
            .await
            .unwrap();
        w.engine
            .grant(
                &w.ops,
                "g-reader",
                "reader",
                ScopeKind::Execution,
                EXEC,
                Access::Read,
                &ts("2027-01-01T00:00:00Z"),
            )
            .await
            .unwrap();
        let first = w.engine.authenticate(&token).await.unwrap();
        let hits = w.engine.principal_cache_hits();
        let trips = store.round_trips();
        let again = w.engine.authenticate(&token).await.unwrap();
        assert_eq!(again, first);
        assert_eq!(store.round_trips(), trips, "the store was asked again");
        assert_eq!(w.engine.principal_cache_hits(), hits + 1);
        // A clone shares what was learnt, as every request of a server does.
        let clone = w.engine.clone();
        assert_eq!(clone.authenticate(&token).await.unwrap(), first);
        assert_eq!(store.round_trips(), trips);
        w.engine.status(&again, EXEC).await.unwrap();

        // The grant is revoked: the very next call, authenticated from memory, is refused.
        w.engine
            .revoke(&w.ops, "g-reader", "rotated out")
            .await
            .unwrap();
        let denials = store.denials(0, 10_000).await.unwrap().len();
        let after = w.engine.authenticate(&token).await.unwrap();
        assert_eq!(w.engine.principal_cache_hits(), hits + 3);
        let err = w.engine.status(&after, EXEC).await.unwrap_err();
        assert_eq!(err.code(), "permission_denied", "{err}");
        assert_eq!(store.denials(0, 10_000).await.unwrap().len(), denials + 1);
        // Another token is not this principal.
        let other = w
            .engine
            .authenticate(&format!("{token}x"))
            .await
            .unwrap_err();
        assert_eq!(other.code(), "unauthenticated", "{other}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_nobody_holds_is_looked_up_and_recorded_every_time() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        let unknown = "vdt_nobody_holds_this_token_0123456789abcdef";
        let denials = store.denials(0, 10_000).await.unwrap().len();
        for n in 1..=3 {
            let trips = store.round_trips();
            let err = w.engine.authenticate(unknown).await.unwrap_err();
            assert_eq!(err.code(), "unauthenticated", "{err}");
            assert!(store.round_trips() > trips, "attempt {n} was not looked up");
            assert!(!w.engine.token_is_held(unknown).await.unwrap());
            assert_eq!(store.denials(0, 10_000).await.unwrap().len(), denials + n);
        }
        // A principal added now authenticates at once: no refusal was kept.
        let token = w
            .engine
            .add_principal(&w.ops, "late", Role::Runner)
            .await
            .unwrap();
        assert!(w.engine.token_is_held(&token).await.unwrap());
        let late = w.engine.authenticate(&token).await.unwrap();
        assert_eq!(late.name().as_str(), "late");
    })
    .await;
}

/// The audit seq of the store's head.
async fn head(store: &std::sync::Arc<dyn verdict_store::Store>) -> u64 {
    store.audit_head().await.unwrap().map_or(0, |h| h.seq)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_refused_at_once_and_a_rotated_one_replaces_it() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        let token = w
            .engine
            .add_principal(&w.ops, "laptop", Role::Runner)
            .await
            .unwrap();
        // Known, and kept: the next authentication is answered from memory.
        let before = w.engine.authenticate(&token).await.unwrap();
        let hits = w.engine.principal_cache_hits();
        assert_eq!(w.engine.authenticate(&token).await.unwrap(), before);
        assert_eq!(w.engine.principal_cache_hits(), hits + 1);
        // Another engine over the same handle has kept it too.
        let other = verdict_engine::Engine::new(store.clone(), "merge");
        other.authenticate(&token).await.unwrap();

        w.engine
            .revoke_token(&w.ops, "laptop", "lost")
            .await
            .unwrap();
        for engine in [&w.engine, &other] {
            let err = engine.authenticate(&token).await.unwrap_err();
            assert_eq!(err.code(), "unauthenticated", "{err}");
            assert!(!engine.token_is_held(&token).await.unwrap());
        }
        // The principal is still listed; revoking again changes nothing that matters.
        assert!(store.principal("laptop").await.unwrap().is_some());

        // An operator gives it a new token; the revoked one stays refused.
        let fresh = w
            .engine
            .rotate_token(&w.ops, "laptop", "found")
            .await
            .unwrap();
        let again = other.authenticate(&fresh).await.unwrap();
        assert_eq!(again.name().as_str(), "laptop");
        assert_eq!(again.role(), Role::Runner);
        let err = w.engine.authenticate(&token).await.unwrap_err();
        assert_eq!(err.code(), "unauthenticated", "{err}");

        // The principal replaces its own: the new one works, the one it replaced does not,
        // on either engine, at once.
        let own = other.rotate_token(&again, "laptop", "").await.unwrap();
        for engine in [&w.engine, &other] {
            let err = engine.authenticate(&fresh).await.unwrap_err();
            assert_eq!(err.code(), "unauthenticated", "{err}");
            assert_eq!(
                engine.authenticate(&own).await.unwrap().name().as_str(),
                "laptop"
            );
        }
        assert!(store.verify_audit(None).await.unwrap().is_intact());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_operator_or_the_principal_itself_changes_a_token_and_a_refusal_is_its_denial() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        let token = w
            .engine
            .add_principal(&w.ops, "target", Role::Runner)
            .await
            .unwrap();
        let target = w.engine.authenticate(&token).await.unwrap();
        // Someone else's token, revoked or replaced, or one's own revoked, by anyone but an
        // operator: refused, and the refusal's denial is the only append.
        for (who, whose, replace) in [
            (&w.coder, "target", false),
            (&w.coder, "target", true),
            (&w.rev, "ops", true),
            (&w.alice, "alice", false),
            (&target, "target", false),
        ] {
            let seq = head(&store).await;
            let err = if replace {
                w.engine.rotate_token(who, whose, "").await.unwrap_err()
            } else {
                w.engine
                    .revoke_token(who, whose, "")
                    .await
                    .map(|()| String::new())
                    .unwrap_err()
            };
            assert_eq!(err.code(), "permission_denied", "{err}");
            let after = store.audit_events(seq, 100).await.unwrap();
            assert_eq!(after.len(), 1, "{after:?}");
            assert_eq!(after[0].table, "denials");
            let denial = store.denials(seq, 1).await.unwrap().pop().unwrap();
            let denial: serde_json::Value = serde_json::from_str(&denial.body).unwrap();
            assert_eq!(denial["principal"], who.name().as_str());
            assert_eq!(denial["code"], "permission_denied");
        }
        assert_eq!(
            w.engine.authenticate(&token).await.unwrap().name().as_str(),
            "target"
        );
        // Bad input is refused before anything is written: an unknown principal, a reason too
        // long.
        let seq = head(&store).await;
        let err = w
            .engine
            .revoke_token(&w.ops, "nobody", "")
            .await
            .unwrap_err();
        assert_eq!(err.code(), "not_found", "{err}");
        let err = w
            .engine
            .rotate_token(&w.ops, "target", &"x".repeat(1025))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "invalid_input", "{err}");
        assert_eq!(head(&store).await, seq);
        assert!(w.engine.authenticate(&token).await.is_ok());
    })
    .await;
}

/// The last operator holding a token cannot revoke it, nor can another operator revoke it
/// once it is the last: nobody could act as an operator again (`init` refuses a store that has
/// principals). The refusal is a conflict naming the operator and appends nothing; a rotation
/// of the same token goes through, and with a second operator holding a token the first may be
/// revoked, after which the second is the last. On both backends, the check in the write's
/// transaction (SQLite) or in the database's routine (PostgreSQL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_operator_holding_a_token_is_never_revoked() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        let refused = |err: verdict_engine::EngineError, operator: &str| {
            assert_eq!(err.code(), "conflict", "{err}");
            let text = err.to_string();
            assert!(
                text.contains(&format!("{operator:?}")) && text.contains("no operator"),
                "{text}"
            );
        };
        let seq = head(&store).await;
        let err = w
            .engine
            .revoke_token(&w.ops, "ops", "leaving")
            .await
            .unwrap_err();
        refused(err, "ops");
        assert_eq!(head(&store).await, seq, "a refused revocation appended");
        // A rotation leaves a token: it goes through, and the new token acts as the operator.
        let fresh = w
            .engine
            .rotate_token(&w.ops, "ops", "rotated")
            .await
            .unwrap();
        let ops = w.engine.authenticate(&fresh).await.unwrap();
        assert_eq!(ops.role(), Role::Operator);

        // A second operator: now either may be revoked, and then the other is the last.
        let second = w
            .engine
            .add_principal(&ops, "ops2", Role::Operator)
            .await
            .unwrap();
        let ops2 = w.engine.authenticate(&second).await.unwrap();
        w.engine
            .revoke_token(&ops2, "ops", "moved on")
            .await
            .unwrap();
        assert_eq!(
            w.engine.authenticate(&fresh).await.unwrap_err().code(),
            "unauthenticated"
        );
        let seq = head(&store).await;
        let err = w.engine.revoke_token(&ops2, "ops2", "").await.unwrap_err();
        refused(err, "ops2");
        assert_eq!(head(&store).await, seq, "a refused revocation appended");
        // Revoking an operator that holds no token already changes nothing that matters and
        // is not refused for this; the last one holding a token still is.
        w.engine.revoke_token(&ops2, "ops", "again").await.unwrap();
        refused(
            w.engine.revoke_token(&ops2, "ops2", "").await.unwrap_err(),
            "ops2",
        );
        // Other principals' tokens are revoked as before.
        w.engine.revoke_token(&ops2, "ci", "lost").await.unwrap();
        // The operator that was revoked gets a token back from the last one; then the last
        // may go.
        let back = w.engine.rotate_token(&ops2, "ops", "back").await.unwrap();
        w.engine.revoke_token(&ops2, "ops2", "done").await.unwrap();
        let ops = w.engine.authenticate(&back).await.unwrap();
        assert_eq!(ops.role(), Role::Operator);
        assert!(store.verify_audit(None).await.unwrap().is_intact());
    })
    .await;
}
