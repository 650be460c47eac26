//! A principal's token revoked and replaced over the API (schema version 30): refused at once
//! by the server that did it, and by another server on the same store within the bound the
//! principal cache keeps; only an operator, or the principal replacing its own, changes a
//! token, and a refusal writes only its denial. On both backends.

use crate::common::*;
use serde_json::json;
use std::time::{Duration, Instant};
use verdict_engine::PRINCIPAL_CACHE_BOUND;
use verdict_server::AppState;

/// A read every principal of the world may make: no subject was put for the execution, so a
/// token that authenticates a principal the grant lets read gets `404 not_found`, an
/// unauthenticated one `401`, and one the grant does not cover `403`.
const STATUS: &str = "/v1/executions/ex-1/status";

/// Sends the status read with `token` to `server` until it is refused as unauthenticated,
/// and fails if that takes longer than the principal cache's bound (and a margin for the
/// requests themselves).
async fn refused_within_the_bound(server: &Server, token: &str) -> Duration {
    let started = Instant::now();
    loop {
        let r = server.send("GET", STATUS, Some(token), None).await;
        if r.status == 401 {
            assert_problem(&r, 401, "unauthenticated");
            return started.elapsed();
        }
        assert_problem(&r, 404, "not_found");
        assert!(
            started.elapsed() < PRINCIPAL_CACHE_BOUND + Duration::from_secs(1),
            "a retired token still authenticates after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_refused_at_once_here_and_within_the_bound_on_another_server() {
    on_both_twice(|one, two| async move {
        let w = world(one).await;
        let a = serve(AppState::new(w.engine.clone())).await;
        let other = verdict_engine::Engine::new(two, "merge");
        let b = serve(AppState::new(other.clone())).await;
        let rev = w.token("rev").to_owned();
        // Both servers know who holds the verifier's token, the other from memory.
        for s in [&a, &b, &b] {
            let r = s.send("GET", STATUS, Some(&rev), None).await;
            assert_problem(&r, 404, "not_found");
        }
        assert!(other.principal_cache_hits() >= 1);

        let r = a
            .send(
                "POST",
                "/v1/principals/rev/token/revoke",
                Some(w.token("ops")),
                Some(&json!({"reason": "laptop lost"})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            (&r.body["name"], &r.body["role"]),
            (&json!("rev"), &json!("verifier"))
        );
        // Refused at once by the server that revoked it, and within the bound by the other.
        let before = head_seq(&w).await;
        let r = a.send("GET", STATUS, Some(&rev), None).await;
        assert_problem(&r, 401, "unauthenticated");
        let after = events_after(&w, before).await;
        assert_eq!(after.len(), 1, "{after:?}");
        assert_eq!(after[0].table, "denials");
        let took = refused_within_the_bound(&b, &rev).await;
        if w.engine.describe_store().starts_with("postgres") {
            // The change's notification, not the bound, ended it: a holder kept from before
            // the change would have been given for nearly the whole bound.
            assert!(
                took < PRINCIPAL_CACHE_BOUND / 2,
                "refused only after {took:?}"
            );
        }
        // The principal and its grants are still there; only the token is gone.
        let r = a
            .send("GET", "/v1/principals/rev", Some(w.token("ops")), None)
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["grants"][0]["in_force"], true, "{r:?}");

        // An operator gives it a new token: it works on both servers at once, and the revoked
        // one stays refused.
        let r = a
            .send(
                "POST",
                "/v1/principals/rev/token/rotate",
                Some(w.token("ops")),
                Some(&json!({})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let fresh = r.body["token"].as_str().unwrap().to_owned();
        assert_ne!(fresh, rev);
        for s in [&a, &b] {
            let r = s.send("GET", STATUS, Some(&fresh), None).await;
            assert_problem(&r, 404, "not_found");
            let r = s.send("GET", STATUS, Some(&rev), None).await;
            assert_problem(&r, 401, "unauthenticated");
        }

        // The verifier replaces its own token through the other server: the new one works, the
        // one it replaced is refused there at once and here within the bound.
        let r = b
            .send(
                "POST",
                "/v1/principals/rev/token/rotate",
                Some(&fresh),
                Some(&json!({"reason": "routine"})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let own = r.body["token"].as_str().unwrap().to_owned();
        let r = b.send("GET", STATUS, Some(&fresh), None).await;
        assert_problem(&r, 401, "unauthenticated");
        refused_within_the_bound(&a, &fresh).await;
        for s in [&a, &b] {
            let r = s.send("GET", STATUS, Some(&own), None).await;
            assert_problem(&r, 404, "not_found");
        }
        let report = w.engine.store().verify_audit(None).await.unwrap();
        assert!(report.is_intact(), "{:#?}", report.problems);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_operator_or_the_principal_itself_changes_a_token_and_a_refusal_writes_its_denial()
{
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        // A producer revoking or replacing a runner's token, or revoking its own: 403, one
        // denial, and the runner's token still works.
        for (path, who) in [
            ("/v1/principals/ci/token/revoke", "coder"),
            ("/v1/principals/ci/token/rotate", "coder"),
            ("/v1/principals/coder/token/revoke", "coder"),
            ("/v1/principals/ops/token/rotate", "rev"),
        ] {
            let before = head_seq(&w).await;
            let r = s
                .send("POST", path, Some(w.token(who)), Some(&json!({})))
                .await;
            assert_denied_once(&w, before, &r, who, "permission_denied").await;
        }
        for who in ["ci", "coder", "ops", "rev"] {
            let r = s.send("GET", STATUS, Some(w.token(who)), None).await;
            assert_eq!(
                (r.status, &r.body["code"]),
                (404, &json!("not_found")),
                "{who}: {r:?}"
            );
        }
        // Unknown principals and bad bodies are refused before anything is written.
        let before = head_seq(&w).await;
        let r = s
            .send(
                "POST",
                "/v1/principals/nobody/token/revoke",
                Some(w.token("ops")),
                Some(&json!({})),
            )
            .await;
        assert_problem(&r, 404, "not_found");
        let r = s
            .send(
                "POST",
                "/v1/principals/ci/token/revoke",
                Some(w.token("ops")),
                Some(&json!({"reason": "x", "token": "mine"})),
            )
            .await;
        assert_eq!(r.status / 100, 4, "{r:?}");
        assert_eq!(head_seq(&w).await, before);
        let report = w.engine.store().verify_audit(None).await.unwrap();
        assert!(report.is_intact(), "{:#?}", report.problems);
    })
    .await;
}
