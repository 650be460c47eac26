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
