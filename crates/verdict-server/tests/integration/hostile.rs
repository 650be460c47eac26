//! Crafted input over real HTTP on loopback, each body on SQLite and on PostgreSQL: U+0000 in
//! a body, a path or a query, an execution id no execution can have, and caller-controlled
//! text too long for a denial record are refused with a 4xx problem document, never a
//! retryable 5xx, and every refusal of authority is recorded.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_core::digest::{DigestKind, digest};
use verdict_server::AppState;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn u0000_anywhere_is_invalid_input_and_writes_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let doc = subject(1, "diff-1");
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&doc))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let before = head_seq(&w).await;

        let r = s
            .send(
                "POST",
                "/v1/requests",
                Some(w.token("coder")),
                Some(&json!({"execution": "ex-1\u{0}"})),
            )
            .await;
        assert_problem(&r, 422, "invalid_input");
        assert!(
            r.body["detail"].as_str().unwrap().contains("/execution"),
            "{r:?}"
        );

        let decision = json!({
            "execution": EXEC,
            "decision": "approve",
            "reason": "a\u{0}b",
            "subject_digest": digest(DigestKind::Subject, &doc).as_str(),
            "policy_digest": digest(DigestKind::Policy, &policy()).as_str(),
        });
        let r = s
            .send(
                "POST",
                "/v1/human-decisions",
                Some(w.token("alice")),
                Some(&decision),
            )
            .await;
        assert_problem(&r, 422, "invalid_input");
        assert!(
            r.body["detail"].as_str().unwrap().contains("/reason"),
            "{r:?}"
        );

        // The same in a member name, and deep inside a document.
        let mut bad = subject(2, "diff-2");
        bad["work_items"][0]["id"] = json!("wp\u{0}");
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&bad))
            .await;
        assert_problem(&r, 422, "invalid_input");
        assert!(
            r.body["detail"]
                .as_str()
                .unwrap()
                .contains("/work_items/0/id"),
            "{r:?}"
        );
        let r = s
            .send(
                "POST",
                "/v1/executions/ex-1/cancel",
                Some(w.token("ops")),
                Some(&json!({"reason": "x", "\u{0}": 1})),
            )
            .await;
        assert_problem(&r, 422, "invalid_input");

        for path in [
            "/v1/executions/ex%00-2/status",
            "/v1/executions/ex%00-2/history",
            "/v1/executions/ex%00-2",
            "/v1/executions/ex%00-2/runs",
            "/v1/executions/ex%00-2/findings",
            "/v1/principals/a%00b",
            "/v1/grants/g%00",
            "/v1/runs/r%00",
            "/v1/runs/r%00/context",
            "/v1/findings/f%00",
            "/v1/policies/p%00",
            "/v1/blobs/sha256%3A%00",
            "/v1/subjects/s%00/blobs",
            "/v1/gate/decisions/k%00/replay",
        ] {
            let r = s.send("GET", path, Some(w.token("ops")), None).await;
            assert_problem(&r, 422, "invalid_input");
            assert_eq!(r.body["retryable"], false, "{path}: {r:?}");
        }
        for (path, body) in [
            ("/v1/executions/ex%00-2/gate-runs", None),
            ("/v1/executions/ex%01/cancel", Some(json!({"reason": "x"}))),
            ("/v1/grants/g%00/revoke", Some(json!({"reason": "x"}))),
            ("/v1/runs/r%00/cancel", Some(json!({"reason": "x"}))),
            ("/v1/requests/r%00/jobs", Some(json!({}))),
        ] {
            let r = s
                .send("POST", path, Some(w.token("ops")), body.as_ref())
                .await;
            assert!((400..500).contains(&r.status), "{path}: {r:?}");
            assert_eq!(r.body["retryable"], false, "{path}: {r:?}");
        }
        for path in [
            "/v1/grants?principal=a%00b",
            "/v1/principals?after=a%00",
            "/v1/executions?after=%00",
            "/v1/jobs?after=%00",
        ] {
            let r = s.send("GET", path, Some(w.token("ops")), None).await;
            assert_problem(&r, 400, "invalid_query");
        }
        assert_eq!(
            head_seq(&w).await,
            before,
            "a refused input wrote something"
        );

        // The store refuses U+0000 itself, on both backends alike, for callers that do not come
        // through the server.
        let e = w
            .engine
            .cancel_execution(&w.ops, EXEC, "a\u{0}b")
            .await
            .unwrap_err();
        assert_eq!(e.code(), "invalid_input", "{e}");
        assert_eq!(head_seq(&w).await, before, "a refused record was written");
        // A read naming U+0000 finds nothing, or is refused as invalid: never a store fault.
        match w.engine.store().principal("a\u{0}b").await {
            Ok(None) | Err(verdict_store::StoreError::Invalid { .. }) => {}
            other => panic!("{other:?}"),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_text_too_long_for_a_denial_is_refused_and_the_denial_recorded() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let nobody = w
            .engine
            .add_principal(
                &w.ops,
                "nobody",
                serde_json::from_value(json!("runner")).unwrap(),
            )
            .await
            .unwrap();

        // An execution id no execution can have: refused before anything is asked.
        let before = head_seq(&w).await;
        let long = "a".repeat(5000);
        let r = s
            .send(
                "POST",
                &format!("/v1/executions/{long}/gate-runs"),
                Some(&nobody),
                None,
            )
            .await;
        assert_problem(&r, 422, "invalid_input");
        assert_eq!(head_seq(&w).await, before);

        // The longest execution id there can be, without a grant: refused and recorded.
        let id = "a".repeat(256);
        let r = s
            .send(
                "POST",
                &format!("/v1/executions/{id}/gate-runs"),
                Some(&nobody),
                None,
            )
            .await;
        assert_denied_once(&w, before, &r, "nobody", "permission_denied").await;

        // A name long enough that the denial's action would pass the record's bound: the
        // action is cut, visibly, and the denial is in the chain.
        let before = head_seq(&w).await;
        let name = "b".repeat(1020);
        let r = s
            .send(
                "GET",
                &format!("/v1/principals/{name}"),
                Some(&nobody),
                None,
            )
            .await;
        assert_denied_once(&w, before, &r, "nobody", "permission_denied").await;
        let denial = w.denials().await.pop().unwrap();
        let action = denial["action"].as_str().unwrap();
        assert_eq!(action.chars().count(), 1024, "{action}");
        assert!(action.ends_with(" [truncated]"), "{action}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_megabytes_long_is_refused_with_a_small_problem_document() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        // A mebibyte where a short id is expected, with an escape sequence in it that would
        // reach a terminal raw if it were repeated unescaped.
        let huge = format!("\u{1b}[2J{}", "x".repeat((1 << 20) - 4));
        let grant = |field: &str| {
            let mut g = json!({"grant_id": "g-new", "principal": "rev", "scope": "execution",
                "scope_id": "ex-1", "access": "read", "expires_at": "2099-01-01T00:00:00Z"});
            g[field] = json!(huge);
            g
        };
        let mut unknown_field = serde_json::Map::new();
        unknown_field.insert("execution".into(), json!(EXEC));
        unknown_field.insert(huge.clone(), json!(1));
        let cases = [
            (
                "ops",
                "/v1/grants",
                grant("grant_id"),
                "grant id",
                "printable characters",
            ),
            (
                "ops",
                "/v1/grants",
                grant("expires_at"),
                "expires_at",
                "rfc 3339",
            ),
            (
                "coder",
                "/v1/requests",
                json!({"execution": EXEC, "capability": huge}),
                "capability",
                "printable characters",
            ),
            (
                "coder",
                "/v1/requests",
                json!({"execution": EXEC, "budget": {"max_runs": huge}}),
                "budget",
                "expected",
            ),
            (
                "coder",
                "/v1/requests",
                serde_json::Value::Object(unknown_field),
                "unknown field",
                "expected",
            ),
        ];
        let put = subject(1, "diff-1");
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&put))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let before = head_seq(&w).await;
        for (who, path, body, field, wrong) in cases {
            let resp = s
                .client
                .post(format!("{}{path}", s.base))
                .bearer_auth(w.token(who))
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&body).unwrap())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status().as_u16(), 422, "{path} {field}");
            let bytes = resp.bytes().await.unwrap();
            // The whole answer is a few hundred bytes, not the mebibyte sent.
            assert!(bytes.len() < 2048, "{path} {field}: {} bytes", bytes.len());
            let problem: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(problem["code"], "invalid_input", "{problem}");
            let detail = problem["detail"].as_str().unwrap();
            // It still says which field and what is wrong with it, shows the start of the
            // value escaped, and says how long the value was and that it was cut.
            assert!(detail.contains(field), "{detail}");
            assert!(detail.contains(wrong), "{detail}");
            assert!(detail.contains("\\u{1b}[2J"), "{detail}");
            assert!(!detail.contains('\u{1b}'), "{detail}");
            assert!(detail.contains("(1048576 bytes in all, cut)"), "{detail}");
        }
        assert_eq!(
            head_seq(&w).await,
            before,
            "a refused value wrote something"
        );
    })
    .await;
}
