//! Principals, grants, the gate's policy and the audit walk over HTTP, each body on SQLite and
//! on PostgreSQL: the operator's happy paths, `If-Match` on the policy, and every other role's
//! attempt at an operator's write refused with `403` and nothing written but its denial.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_server::AppState;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_manages_principals_grants_and_the_policy_over_the_api() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let ops = w.token("ops");

        let r = s
            .send(
                "POST",
                "/v1/principals",
                Some(ops),
                Some(&json!({"name": "dana", "role": "verifier"})),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.body["role"], "verifier");
        let dana = r.body["token"].as_str().unwrap().to_owned();
        // The token works, and shows only its holder to a non-operator.
        let r = s.send("GET", "/v1/principals", Some(&dana), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            r.body["items"],
            json!([{"name": "dana", "role": "verifier"}])
        );
        let r = s.send("GET", "/v1/principals", Some(ops), None).await;
        let names: Vec<&str> = r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ops", "coder", "ci", "rev", "alice", "dana"]);
        // No token hash anywhere in a principal's view.
        assert!(!r.body.to_string().contains("sha256"), "{r:?}");

        let grant = json!({
            "grant_id": "g-dana",
            "principal": "dana",
            "scope": "execution",
            "scope_id": EXEC,
            "access": "read",
            "expires_at": "2099-01-01T00:00:00Z",
        });
        let r = s.send("POST", "/v1/grants", Some(ops), Some(&grant)).await;
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.body["in_force"], true, "{r:?}");
        assert_eq!(r.body["access"], "read");
        // The same id with other content is a conflict, not a second grant.
        let mut wider = grant.clone();
        wider["access"] = json!("write");
        let r = s.send("POST", "/v1/grants", Some(ops), Some(&wider)).await;
        assert_problem(&r, 409, "conflict");
        let r = s.send("GET", "/v1/principals/dana", Some(ops), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["grants"][0]["grant_id"], "g-dana");
        let r = s.send("GET", "/v1/grants/g-dana", Some(&dana), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        let r = s
            .send("GET", "/v1/grants?principal=dana", Some(ops), None)
            .await;
        assert_eq!(r.body["items"].as_array().unwrap().len(), 1, "{r:?}");
        let r = s
            .send(
                "POST",
                "/v1/grants/g-dana/revoke",
                Some(ops),
                Some(&json!({"reason": "rotated off the review"})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["in_force"], false, "{r:?}");
        assert_eq!(r.body["revoked_because"], "rotated off the review");
        let r = s.send("GET", "/v1/grants/g-none", Some(ops), None).await;
        assert_problem(&r, 404, "not_found");

        // The policy: read with its tag, set only against the tag read.
        let r = s.send("GET", "/v1/gate/policy", Some(&dana), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["revision"], 1);
        assert_eq!(r.body["policy"]["name"], "merge");
        let old_digest = r.body["policy_digest"].as_str().unwrap().to_owned();
        let tag = r.headers["etag"].to_str().unwrap().to_owned();
        let mut next = policy();
        next["revision"] = json!(2);
        let r = s
            .send_headers(
                "PUT",
                "/v1/gate/policy",
                Some(ops),
                Some(&next),
                &[("if-match", &tag)],
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["revision"], 2);
        let new_tag = r.headers["etag"].to_str().unwrap().to_owned();
        assert_ne!(new_tag, tag);
        // The old tag no longer matches: 412, and the gate does not move.
        let mut third = policy();
        third["revision"] = json!(3);
        let before = head_seq(&w).await;
        let r = s
            .send_headers(
                "PUT",
                "/v1/gate/policy",
                Some(ops),
                Some(&third),
                &[("if-match", &tag)],
            )
            .await;
        assert_problem(&r, 412, "precondition_failed");
        assert_eq!(head_seq(&w).await, before, "a refused policy set wrote");
        assert_eq!(
            w.engine
                .gate_policy_head(&w.ops)
                .await
                .unwrap()
                .unwrap()
                .revision,
            2
        );
        // Against the tag just read, the same write goes through.
        let r = s
            .send_headers(
                "PUT",
                "/v1/gate/policy",
                Some(ops),
                Some(&third),
                &[("if-match", &new_tag)],
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["revision"], 3);
        let r = s
            .send(
                "GET",
                &format!("/v1/policies/{old_digest}"),
                Some(&dana),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["policy"]["revision"], 1);

        let r = s.send("POST", "/v1/audit/verify", Some(ops), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["intact"], true, "{r:?}");
        assert!(r.body["events"].as_u64().unwrap() > 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_role_s_operator_write_is_403_and_writes_only_its_denial() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let grant = json!({
            "grant_id": "g-self",
            "principal": "ci",
            "scope": "execution",
            "scope_id": "ex-other",
            "access": "write",
            "expires_at": "2099-01-01T00:00:00Z",
        });
        let reason = json!({"reason": "because I can"});
        let tries: Vec<(&str, &str, &str, Option<serde_json::Value>, &str)> = vec![
            // Only operators add principals, even of their own role.
            (
                "coder",
                "POST",
                "/v1/principals",
                Some(json!({"name": "coder2", "role": "producer"})),
                "permission_denied",
            ),
            (
                "alice",
                "POST",
                "/v1/principals",
                Some(json!({"name": "root", "role": "operator"})),
                "permission_denied",
            ),
            // Nobody grants itself access.
            (
                "ci",
                "POST",
                "/v1/grants",
                Some(grant.clone()),
                "permission_denied",
            ),
            (
                "rev",
                "POST",
                "/v1/grants",
                Some(grant),
                "permission_denied",
            ),
            // Nobody revokes another's grant.
            (
                "rev",
                "POST",
                "/v1/grants/g-coder/revoke",
                Some(reason.clone()),
                "permission_denied",
            ),
            // Nobody but an operator sets the policy the work is held to.
            (
                "coder",
                "PUT",
                "/v1/gate/policy",
                Some(policy()),
                "permission_denied",
            ),
            (
                "alice",
                "PUT",
                "/v1/gate/policy",
                Some(policy()),
                "permission_denied",
            ),
            // Nobody but an operator cancels a verifier's run.
            (
                "coder",
                "POST",
                "/v1/runs/run-a/cancel",
                Some(reason),
                "permission_denied",
            ),
            // The audit walk reads every row.
            ("ci", "POST", "/v1/audit/verify", None, "permission_denied"),
            // A producer never submits a result.
            (
                "coder",
                "POST",
                "/v1/results",
                Some(result("run-a", &DEF.parse().unwrap(), 1, "ev-1")),
                "self_verification_denied",
            ),
            // Only an operator or the verifier itself admits a verifier to a run.
            ("ci", "POST", "/v1/runs", Some(json!({"request": DEF, "verifier": "rev", "class": "reviewer", "run_id": "run-c"})), "permission_denied"),
            // Only verifiers submit results.
            ("alice", "POST", "/v1/results", Some(result("run-a", &DEF.parse().unwrap(), 1, "ev-1")), "permission_denied"),
            // Reads outside the caller's reach are refused and recorded too.
            ("ci", "GET", "/v1/principals/ops", None, "permission_denied"),
            (
                "ci",
                "GET",
                "/v1/grants?principal=coder",
                None,
                "permission_denied",
            ),
        ];
        for (who, method, path, body, code) in tries {
            let before = head_seq(&w).await;
            let r = s
                .send(method, path, Some(w.token(who)), body.as_ref())
                .await;
            assert_denied_once(&w, before, &r, who, code).await;
        }
        // Nothing moved: the same principals, grants and policy.
        assert_eq!(w.engine.gate_policy_head(&w.ops).await.unwrap().unwrap().revision, 1);
        let all = w.engine.list_principals(&w.ops).await.unwrap();
        assert_eq!(all.len(), 5);
        let grants = w.engine.list_grants(&w.ops, None).await.unwrap();
        assert_eq!(grants.len(), 4);
        assert!(grants.iter().all(|g| g.in_force));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_name_that_could_pass_for_another_is_refused_over_the_api() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let ops = w.token("ops");
        let before = head_seq(&w).await;
        // `оperator` with a Cyrillic `о`, and `rοot` with a Greek omicron.
        for (name, named) in [
            ("\u{43e}perator", "U+043E, Cyrillic at character 1"),
            ("r\u{3bf}ot", "U+03BF, Greek at character 2"),
        ] {
            let r = s
                .send(
                    "POST",
                    "/v1/principals",
                    Some(ops),
                    Some(&json!({"name": name, "role": "operator"})),
                )
                .await;
            assert_problem(&r, 422, "invalid_input");
            let detail = r.body["detail"].as_str().unwrap();
            assert!(detail.contains("principal name"), "{detail}");
            assert!(detail.contains(named), "{detail}");
            assert!(w.engine.store().principal(name).await.unwrap().is_none());
        }
        assert_eq!(head_seq(&w).await, before);
    })
    .await;
}
