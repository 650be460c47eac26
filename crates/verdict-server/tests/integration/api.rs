//! The HTTP API over real HTTP on loopback, each test body run on SQLite and on PostgreSQL:
//! the lifecycle from subject to decision, refusals of authority (403 with their code, writing
//! nothing but the denial), authentication (401, recorded), bad bodies (4xx problem documents,
//! never 5xx) and the generated OpenAPI description.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use verdict_core::digest::{DigestKind, digest};
use verdict_server::AppState;

/// A bad request: method, path, body, media type, and the status and code it must get.
type BadBody = (
    &'static str,
    &'static str,
    Vec<u8>,
    &'static str,
    u16,
    &'static str,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_walks_from_subject_to_decision_through_the_api() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;

        let doc = subject(1, "diff-1");
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&doc))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let sd = digest(DigestKind::Subject, &doc);
        assert_eq!(r.body["digest"], sd.as_str());

        let ev = evidence(sd.as_str(), "pass");
        let r = s
            .send(
                "POST",
                "/v1/evidence",
                Some(w.token("ci")),
                Some(&json!({"evidence": [ev]})),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.body["digests"].as_array().unwrap().len(), 1);

        let r = s
            .send(
                "POST",
                "/v1/requests",
                Some(w.token("coder")),
                Some(&json!({"execution": EXEC, "budget": {"max_runs": 1}})),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let req: verdict_core::digest::Digest = r.body["digest"].as_str().unwrap().parse().unwrap();

        // Admission and the verifier's result are not routes of this API yet.
        let pre = w
            .engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-a")
            .await
            .unwrap();
        assert!(!pre.skipped, "{pre:?}");
        let sub = w
            .engine
            .submit_result(&w.rev, &result("run-a", &sd, 1, ev["id"].as_str().unwrap()))
            .await
            .unwrap();
        assert!(sub.counted);

        // Before the gate runs, nothing applies.
        let r = s
            .send(
                "GET",
                "/v1/executions/ex-1/status",
                Some(w.token("coder")),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.body["applicable"].is_null(), "{r:?}");
        assert_eq!(r.body["head"]["subject_digest"], sd.as_str());

        let r = s
            .send(
                "POST",
                "/v1/executions/ex-1/gate-runs",
                Some(w.token("ops")),
                None,
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.body["inserted"], true);
        assert_eq!(r.body["clock"], "system", "{r:?}");
        assert_eq!(r.body["decision"]["outcome"], "pass", "{r:?}");
        let key = r.body["decision"]["evaluation_key"]
            .as_str()
            .unwrap()
            .to_owned();
        // What the API returned is what the store holds, and it replays.
        let replay = w
            .engine
            .gate_replay(&w.ops, &key.parse().unwrap())
            .await
            .unwrap();
        assert_eq!(
            verdict_core::json::parse_str(&replay.bytes).unwrap(),
            r.body["decision"]
        );

        let r = s
            .send(
                "GET",
                "/v1/executions/ex-1/status",
                Some(w.token("alice")),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["applicable"]["decision"]["outcome"], "pass", "{r:?}");
        let policy = r.body["gate"]["policy_digest"].as_str().unwrap().to_owned();

        let decision = json!({
            "execution": EXEC,
            "decision": "approve",
            "reason": "read the diff and the test log",
            "subject_digest": sd.as_str(),
            "policy_digest": policy,
        });
        // A decision naming a subject that is not the current one is refused, not rebound.
        let mut stale = decision.clone();
        stale["subject_digest"] = json!(digest(DigestKind::Subject, &subject(1, "other")).as_str());
        let before = head_seq(&w).await;
        let r = s
            .send(
                "POST",
                "/v1/human-decisions",
                Some(w.token("alice")),
                Some(&stale),
            )
            .await;
        assert_problem(&r, 409, "conflict");
        assert_eq!(
            head_seq(&w).await,
            before,
            "a refused decision wrote something"
        );
        // The decision passed: nothing needs a person's approval, so an approval is refused
        // and writes nothing; so is one naming a decision that is not the current evaluation.
        let r = s
            .send(
                "POST",
                "/v1/human-decisions",
                Some(w.token("alice")),
                Some(&decision),
            )
            .await;
        assert_problem(&r, 409, "conflict");
        let mut named = decision.clone();
        named["reviewed_decision"] = json!(DEF);
        let r = s
            .send(
                "POST",
                "/v1/human-decisions",
                Some(w.token("alice")),
                Some(&named),
            )
            .await;
        assert_problem(&r, 409, "conflict");
        assert!(r.body.to_string().contains(&key), "{r:?}");
        assert_eq!(
            head_seq(&w).await,
            before,
            "a refused decision wrote something"
        );
        // A rejection naming the current decision is recorded.
        let mut rejection = decision.clone();
        rejection["decision"] = json!("reject");
        rejection["reviewed_decision"] = json!(key);
        let r = s
            .send(
                "POST",
                "/v1/human-decisions",
                Some(w.token("alice")),
                Some(&rejection),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let hd: verdict_core::digest::Digest = r.body["digest"].as_str().unwrap().parse().unwrap();
        assert!(
            w.engine
                .store()
                .get(verdict_store::DocKind::HumanDecision, &hd)
                .await
                .unwrap()
                .is_some()
        );
        // The rejection moved the evidence set: the pass no longer applies, and the status
        // over HTTP says why with the stable code.
        let r = s
            .send(
                "GET",
                "/v1/executions/ex-1/status",
                Some(w.token("ops")),
                None,
            )
            .await;
        assert!(r.body["applicable"].is_null(), "{r:?}");
        assert_eq!(
            r.body["latest"]["not_applicable"],
            json!(["evidence_set_moved"]),
            "{r:?}"
        );

        let r = s
            .send(
                "GET",
                "/v1/executions/ex-1/history",
                Some(w.token("ops")),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["decisions"].as_array().unwrap().len(), 1, "{r:?}");
        let runs = r.body["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{r:?}");
        assert_eq!(runs[0]["run_id"], "run-a");

        let r = s
            .send(
                "POST",
                "/v1/executions/ex-1/cancel",
                Some(w.token("coder")),
                Some(&json!({"reason": "superseded by another plan"})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["cancelled"]["kind"], "execution", "{r:?}");
        let r = s
            .send(
                "GET",
                "/v1/executions/ex-1/status",
                Some(w.token("ops")),
                None,
            )
            .await;
        assert!(r.body["applicable"].is_null(), "{r:?}");
        assert!(!r.body["cancelled"].is_null(), "{r:?}");
        assert!(
            r.body["latest"]["not_applicable"]
                .as_array()
                .unwrap()
                .contains(&json!("execution_cancelled")),
            "{r:?}"
        );
        // A cancelled execution is never gated again.
        let r = s
            .send(
                "POST",
                "/v1/executions/ex-1/gate-runs",
                Some(w.token("ops")),
                None,
            )
            .await;
        assert_problem(&r, 409, "conflict");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_cross_role_write_is_403_and_writes_only_its_denial() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let doc = subject(1, "diff-1");

        // Each try: the refusal's status and code, and exactly one audit event after it, a
        // denial naming the caller.
        let tries: [(&str, &str, Value, &str); 4] = [
            // A runner may not put subjects.
            ("ci", "/v1/subjects", doc.clone(), "permission_denied"),
            // A verifier may not put them either.
            ("rev", "/v1/subjects", doc.clone(), "permission_denied"),
            // A human may not create requests.
            (
                "alice",
                "/v1/requests",
                json!({"execution": EXEC}),
                "permission_denied",
            ),
            // A verifier may not append check evidence.
            (
                "rev",
                "/v1/evidence",
                json!({"evidence": [evidence(digest(DigestKind::Subject, &doc).as_str(), "pass")]}),
                "permission_denied",
            ),
        ];
        for (who, path, body, code) in tries {
            let before = head_seq(&w).await;
            let r = s.send("POST", path, Some(w.token(who)), Some(&body)).await;
            assert_problem(&r, 403, code);
            assert_eq!(r.body["retryable"], false);
            let after = events_after(&w, before).await;
            assert_eq!(after.len(), 1, "{who} {path}: {after:?}");
            assert_eq!(after[0].table, "denials", "{who} {path}");
            let denial = w.denials().await.pop().unwrap();
            assert_eq!(denial["principal"], who);
            assert_eq!(denial["code"], code);
        }
        assert!(
            w.engine
                .execution_head(&w.ops, EXEC)
                .await
                .unwrap()
                .is_none()
        );

        // The producer may not decide on its own work: self-verification, also 403.
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&doc))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let status = s
            .send(
                "GET",
                "/v1/executions/ex-1/status",
                Some(w.token("coder")),
                None,
            )
            .await;
        let decision = json!({
            "execution": EXEC,
            "decision": "approve",
            "reason": "looks right to me",
            "subject_digest": status.body["head"]["subject_digest"],
            "policy_digest": status.body["gate"]["policy_digest"],
        });
        let before = head_seq(&w).await;
        let r = s
            .send(
                "POST",
                "/v1/human-decisions",
                Some(w.token("coder")),
                Some(&decision),
            )
            .await;
        assert_problem(&r, 403, "self_verification_denied");
        let after = events_after(&w, before).await;
        assert_eq!(after.len(), 1, "{after:?}");
        assert_eq!(after[0].table, "denials");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_unknown_token_is_401_and_recorded() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let doc = subject(1, "diff-1");
        let before = w.denials().await.len();

        let r = s.send("POST", "/v1/subjects", None, Some(&doc)).await;
        assert_problem(&r, 401, "unauthenticated");
        assert_eq!(r.headers.get("www-authenticate").unwrap(), "Bearer");

        let r = s
            .send(
                "GET",
                "/v1/executions/ex-1/status",
                Some("vdt_not-a-token"),
                None,
            )
            .await;
        assert_problem(&r, 401, "unauthenticated");

        // A credential of another scheme is no token at all.
        let r = s
            .client
            .get(format!("{}/v1/executions/ex-1/history", s.base))
            .header("authorization", format!("Basic {}", w.token("ops")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);

        let denials = w.denials().await;
        assert_eq!(denials.len(), before + 3, "{denials:?}");
        for d in &denials[before..] {
            assert_eq!(d["principal"], "unauthenticated");
            assert_eq!(d["code"], "unauthenticated");
            // Never the token itself.
            assert!(!d.to_string().contains("not-a-token"), "{d}");
            assert!(!d.to_string().contains(w.token("ops")), "{d}");
        }
        assert!(
            w.engine
                .execution_head(&w.ops, EXEC)
                .await
                .unwrap()
                .is_none()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_4xx_problem_documents_and_write_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        let state = AppState {
            body_limit: 4096,
            ..AppState::new(w.engine.clone())
        };
        let s = serve(state).await;
        let coder = w.token("coder");
        // An execution with a subject, so a refusal below is about the body, not a missing head.
        let r = s.send("POST", "/v1/subjects", Some(coder), Some(&subject(1, "diff-1"))).await;
        assert_eq!(r.status, 201, "{r:?}");
        let json = "application/json";
        let big = format!("{{\"reason\": \"{}\"}}", "x".repeat(8192));
        let mut arrayed = subject(2, "diff-2");
        arrayed["execution"] = json!(["ex-1", 2]);
        let cases: Vec<BadBody> = vec![
            ("POST", "/v1/subjects", serde_json::to_vec(&arrayed).unwrap(), json, 422, "invalid_input"),
            ("POST", "/v1/subjects", b"{\"schema\": ".to_vec(), json, 400, "malformed_body"),
            ("POST", "/v1/subjects", b"not json".to_vec(), json, 400, "malformed_body"),
            ("POST", "/v1/requests", br#"{"execution": "ex-1", "execution": "ex-2"}"#.to_vec(), json, 400, "malformed_body"),
            ("POST", "/v1/requests", br#"{"execution": "ex-1", "budget": {"max_runs": 9007199254740993}}"#.to_vec(), json, 400, "malformed_body"),
            ("POST", "/v1/requests", br#"{"execution": 5}"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/requests", br#"{"execution": "ex-1", "priority": 1}"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/requests", br#"[]"#.to_vec(), json, 422, "invalid_input"),
            // An array of the fields in order is not the object (serde_json's reader takes it).
            ("POST", "/v1/requests", br#"["ex-1"]"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/requests", br#"{"execution": "ex-1", "budget": [1]}"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/evidence", br#"{"evidence": {}}"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/evidence", br#"{"evidence": [{"id": "ev-1"}]}"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/subjects", br#"{"schema": "verdict.subject/v1"}"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/subjects", br#"null"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/human-decisions", br#"{"execution": "ex-1", "decision": "maybe", "reason": "r", "subject_digest": "sha256:00", "policy_digest": "sha256:00"}"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/executions/ex-1/cancel", big.into_bytes(), json, 413, "payload_too_large"),
            ("POST", "/v1/subjects", b"{}".to_vec(), "text/plain", 415, "unsupported_media_type"),
            ("POST", "/v1/subjects", b"{}".to_vec(), "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
            ("POST", "/v1/principals", br#"{"name": "x", "role": "king"}"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/grants", br#"{"grant_id": "g", "principal": "ci", "scope": "execution", "scope_id": "ex-1", "access": "read", "expires_at": "tomorrow"}"#.to_vec(), json, 422, "invalid_input"),
            ("POST", "/v1/runs", br#"{"request": "sha256:00", "verifier": "rev", "class": "reviewer", "run_id": "r"}"#.to_vec(), json, 422, "invalid_input"),
            ("PUT", "/v1/gate/policy", b"{\"schema\": 1,}".to_vec(), json, 400, "malformed_body"),
            ("PUT", "/v1/gate/policy", b"{}".to_vec(), "text/yaml", 415, "unsupported_media_type"),
            ("GET", "/v1/principals?limit=many", Vec::new(), json, 400, "invalid_query"),
            ("GET", "/v1/grants?limit=0", Vec::new(), json, 400, "invalid_query"),
            ("GET", "/v1/executions?colour=red", Vec::new(), json, 400, "invalid_query"),
            ("GET", "/v1/policies/not-a-digest", Vec::new(), json, 422, "invalid_input"),
            ("POST", "/v1/no-such-route", b"{}".to_vec(), json, 404, "route_not_found"),
            ("DELETE", "/v1/subjects", b"{}".to_vec(), json, 405, "route_not_found"),
        ];
        let before = head_seq(&w).await;
        for (method, path, body, media, status, code) in cases {
            let shown = String::from_utf8_lossy(&body).chars().take(80).collect::<String>();
            let r = s.send_raw(method, path, Some(coder), Some((body, media))).await;
            assert!(r.status < 500, "{method} {path} {shown}: {r:?}");
            assert_problem(&r, status, code);
        }
        // A path segment that is not UTF-8 is the client's mistake too, and said to be the
        // path's, not a body's (these requests have none).
        for path in ["/v1/executions/%FF/status", "/v1/executions/%FF%FE", "/v1/runs/%FF"] {
            let r = s.send("GET", path, Some(coder), None).await;
            assert_problem(&r, 422, "invalid_input");
            let detail = r.body["detail"].as_str().unwrap();
            assert!(detail.starts_with("the path segment cannot be read"), "{path}: {r:?}");
            assert!(!r.body["title"].as_str().unwrap().contains("body"), "{path}: {r:?}");
        }
        // The engine's own "not stored" for an execution that does not exist, told to an
        // operator (anyone else is refused as for an execution out of its scope, and that
        // refusal is recorded: `reads.rs`).
        let r = s.send("POST", "/v1/requests", Some(w.token("ops")), Some(&json!({"execution": "ex-none"}))).await;
        assert_problem(&r, 404, "not_found");
        assert_eq!(head_seq(&w).await, before, "a bad body wrote something");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_names_every_route_and_probes_answer() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;

        let r = s.send("GET", "/openapi.json", None, None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.content_type.starts_with("application/json"), "{r:?}");
        assert_eq!(r.body["openapi"], "3.1.0");
        let paths = r.body["paths"].as_object().unwrap();
        let expected = [
            ("/v1/subjects", "post"),
            ("/v1/evidence", "post"),
            ("/v1/requests", "post"),
            ("/v1/executions/{id}/gate-runs", "post"),
            ("/v1/executions/{id}/status", "get"),
            ("/v1/executions/{id}/history", "get"),
            ("/v1/executions/{id}/cancel", "post"),
            ("/v1/human-decisions", "post"),
            ("/v1/executions", "get"),
            ("/v1/executions/{id}", "get"),
            ("/v1/executions/{id}/runs", "get"),
            ("/v1/runs", "post"),
            ("/v1/runs/{id}", "get"),
            ("/v1/runs/{id}/cancel", "post"),
            ("/v1/results", "post"),
            ("/v1/runs/{id}/context", "get"),
            ("/v1/executions/{id}/findings", "get"),
            ("/v1/findings/{id}", "get"),
            ("/v1/requests/{digest}/jobs", "post"),
            ("/v1/jobs", "get"),
            ("/v1/gates", "get"),
            ("/v1/gate/decisions/{key}/replay", "get"),
            ("/v1/subjects/{digest}/blobs", "get"),
            ("/v1/executions/{id}/export/junit", "get"),
            ("/v1/executions/{id}/export/github", "get"),
            ("/v1/ledger", "get"),
            ("/v1/blobs/{digest}", "put"),
            ("/v1/blobs/{digest}", "get"),
            ("/v1/principals", "post"),
            ("/v1/principals", "get"),
            ("/v1/principals/{name}", "get"),
            ("/v1/principals/{name}/token/revoke", "post"),
            ("/v1/principals/{name}/token/rotate", "post"),
            ("/v1/grants", "post"),
            ("/v1/grants", "get"),
            ("/v1/grants/{id}", "get"),
            ("/v1/grants/{id}/revoke", "post"),
            ("/v1/gate/policy", "get"),
            ("/v1/gate/policy", "put"),
            ("/v1/policies/{digest}", "get"),
            ("/v1/audit/verify", "post"),
            ("/v1/events", "get"),
            ("/v1/webhooks", "post"),
            ("/v1/webhooks", "get"),
            ("/v1/webhooks/{id}", "delete"),
            ("/healthz", "get"),
            ("/readyz", "get"),
            ("/metrics", "get"),
            ("/openapi.json", "get"),
        ];
        let methods: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
        assert_eq!(methods, expected.len(), "{:?}", paths.keys());
        for (path, method) in expected {
            let op = &paths[path][method];
            assert!(op.is_object(), "{path} {method} missing");
            if path.starts_with("/v1/") || path == "/metrics" {
                assert_eq!(op["security"], json!([{"bearer": []}]), "{path}");
                assert!(op["responses"]["4XX"].is_object(), "{path}");
            }
        }
        assert_eq!(
            r.body["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
        assert!(r.body["components"]["schemas"]["Problem"].is_object());

        let r = s.send("GET", "/healthz", None, None).await;
        assert_eq!((r.status, &r.body["status"]), (200, &json!("ok")));
        let r = s.send("GET", "/readyz", None, None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["schema_version"], verdict_store::SCHEMA_VERSION);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_the_store_cannot_record_is_503_and_retryable() {
    on_both_backed(|store, backing| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let doc = subject(1, "diff-1");
        backing.refuse_denials().await;
        let before = head_seq(&w).await;
        // A refusal of authority and a failed authentication: neither is answered as if its
        // denial were on record, and neither is blamed on the client.
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("ci")), Some(&doc))
            .await;
        assert_problem(&r, 503, "store_error");
        assert_eq!(r.body["retryable"], true);
        assert!(
            r.body["detail"]
                .as_str()
                .unwrap()
                .contains("recording the denial failed"),
            "{r:?}"
        );
        let r = s
            .send("GET", "/v1/executions", Some("vdt_unknown"), None)
            .await;
        assert_problem(&r, 503, "store_error");
        assert_eq!(head_seq(&w).await, before, "something was written");
        // Once the store takes denials again, the same request is refused and recorded.
        backing.accept_denials().await;
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("ci")), Some(&doc))
            .await;
        assert_denied_once(&w, before, &r, "ci", "permission_denied").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_need_a_bearer_and_a_grant_in_force_and_a_refusal_writes_only_its_denial() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let r = s
            .send(
                "POST",
                "/v1/subjects",
                Some(w.token("coder")),
                Some(&subject(1, "d")),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        // A verifier whose only grant is on another execution.
        let role = serde_json::from_value(json!("verifier")).unwrap();
        let outsider = w
            .engine
            .add_principal(&w.ops, "outsider", role)
            .await
            .unwrap();
        w.engine
            .grant(
                &w.ops,
                "g-outsider",
                "outsider",
                verdict_store::ScopeKind::Execution,
                "ex-2",
                verdict_store::Access::Read,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        for path in ["/v1/executions/ex-1/status", "/v1/executions/ex-1/history"] {
            // No bearer: 401, recorded without a principal.
            let before = head_seq(&w).await;
            let r = s.send("GET", path, None, None).await;
            assert_problem(&r, 401, "unauthenticated");
            assert_eq!(r.headers.get("www-authenticate").unwrap(), "Bearer");
            let after = events_after(&w, before).await;
            assert_eq!(after.len(), 1, "{after:?}");
            assert_eq!(after[0].table, "denials");

            // Out of scope: 403, and its denial is the only write.
            let before = head_seq(&w).await;
            let r = s.send("GET", path, Some(&outsider), None).await;
            assert_problem(&r, 403, "permission_denied");
            assert!(
                r.body["detail"].as_str().unwrap().contains("outsider"),
                "{r:?}"
            );
            let after = events_after(&w, before).await;
            assert_eq!(after.len(), 1, "{after:?}");
            assert_eq!(after[0].table, "denials");
            let denial = w.denials().await.pop().unwrap();
            assert_eq!(denial["principal"], "outsider");
            assert_eq!(denial["code"], "permission_denied");

            // In scope, and the operator: 200, nothing written.
            let before = head_seq(&w).await;
            for who in ["rev", "ops"] {
                let r = s.send("GET", path, Some(w.token(who)), None).await;
                assert_eq!(r.status, 200, "{who}: {r:?}");
            }
            assert_eq!(head_seq(&w).await, before);
        }
        // Revoked, the verifier's grant reads nothing either.
        w.engine
            .revoke(&w.ops, "g-rev", "rotated out")
            .await
            .unwrap();
        let r = s
            .send(
                "GET",
                "/v1/executions/ex-1/status",
                Some(w.token("rev")),
                None,
            )
            .await;
        assert_problem(&r, 403, "permission_denied");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_revoked_through_one_server_is_refused_by_another_on_its_next_request() {
    on_both_twice(|one, two| async move {
        let w = world(one).await;
        let a = serve(AppState::new(w.engine.clone())).await;
        // Another server over its own handle, as a second process: it learns who holds the
        // verifier's token on its first request and does not ask the store again.
        let other = verdict_engine::Engine::new(two, "merge");
        let b = serve(AppState::new(other.clone())).await;
        let r = a
            .send(
                "POST",
                "/v1/subjects",
                Some(w.token("coder")),
                Some(&subject(1, "d")),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        for _ in 0..2 {
            let r = b
                .send(
                    "GET",
                    "/v1/executions/ex-1/status",
                    Some(w.token("rev")),
                    None,
                )
                .await;
            assert_eq!(r.status, 200, "{r:?}");
        }
        let hits = other.principal_cache_hits();
        assert!(
            hits >= 1,
            "the second request asked the store who holds the token"
        );
        let r = a
            .send(
                "POST",
                "/v1/grants/g-rev/revoke",
                Some(w.token("ops")),
                Some(&json!({"reason": "rotated out"})),
            )
            .await;
        assert_eq!(r.status / 100, 2, "{r:?}");
        // The very next request on the other server: authenticated from memory, refused by the
        // grant it reads, and its denial is the only write.
        let before = head_seq(&w).await;
        let r = b
            .send(
                "GET",
                "/v1/executions/ex-1/status",
                Some(w.token("rev")),
                None,
            )
            .await;
        assert_eq!(other.principal_cache_hits(), hits + 1);
        assert_denied_once(&w, before, &r, "rev", "permission_denied").await;
        // A token nobody holds is refused there too, every time, each refusal recorded.
        for _ in 0..2 {
            let before = head_seq(&w).await;
            let r = b
                .send(
                    "GET",
                    "/v1/executions/ex-1/status",
                    Some("vdt_nobody"),
                    None,
                )
                .await;
            assert_problem(&r, 401, "unauthenticated");
            assert_eq!(events_after(&w, before).await.len(), 1);
        }
    })
    .await;
}
