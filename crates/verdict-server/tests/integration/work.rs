//! Executions, verifier runs and results over HTTP, each body on SQLite and on PostgreSQL: a
//! verifier admitted, its result counted, runs listed and cancelled, and `If-Match` on the
//! subject put that moves an execution.
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
async fn a_verifier_is_admitted_and_its_result_counts_through_the_api() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let (ops, rev, coder) = (w.token("ops"), w.token("rev"), w.token("coder"));

        let doc = subject(1, "diff-1");
        let sd = digest(DigestKind::Subject, &doc);
        let r = s.send("POST", "/v1/subjects", Some(coder), Some(&doc)).await;
        assert_eq!(r.status, 201, "{r:?}");
        let ev = evidence(sd.as_str(), "pass");
        let r = s
            .send("POST", "/v1/evidence", Some(w.token("ci")), Some(&json!({"evidence": [ev]})))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s
            .send("POST", "/v1/requests", Some(coder), Some(&json!({"execution": EXEC, "budget": {"max_runs": 3}})))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let request = r.body["digest"].as_str().unwrap().to_owned();

        // A verifier may admit itself, and only itself.
        let admit = |verifier: &str, run: &str| {
            json!({"request": request, "verifier": verifier, "class": "reviewer", "run_id": run})
        };
        let r = s.send("POST", "/v1/runs", Some(rev), Some(&admit("rev", "run-a"))).await;
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.body["run_id"], "run-a");
        assert_eq!(r.body["skipped"], false, "{r:?}");
        let before = head_seq(&w).await;
        let r = s.send("POST", "/v1/runs", Some(rev), Some(&admit("alice", "run-x"))).await;
        assert_denied_once(&w, before, &r, "rev", "permission_denied").await;

        let r = s.send("GET", "/v1/runs/run-a", Some(rev), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        // Admitted and not ended: no status change recorded yet.
        assert_eq!(r.body["events"], json!([]), "{r:?}");
        assert_eq!(r.body["subject_digest"], sd.as_str());

        let res = result("run-a", &sd, 1, ev["id"].as_str().unwrap());
        let r = s.send("POST", "/v1/results", Some(rev), Some(&res)).await;
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.body["counted"], true, "{r:?}");
        assert!(r.body["why_not"].is_null());

        // A second run, cancelled by the operator; cancelling it again is a conflict.
        let r = s.send("POST", "/v1/runs", Some(ops), Some(&admit("rev", "run-b"))).await;
        assert_eq!(r.status, 201, "{r:?}");
        let why = json!({"reason": "one review is enough"});
        let r = s.send("POST", "/v1/runs/run-b/cancel", Some(ops), Some(&why)).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["cancelled"]["kind"], "run", "{r:?}");
        let r = s.send("POST", "/v1/runs/run-b/cancel", Some(ops), Some(&why)).await;
        assert_problem(&r, 409, "conflict");
        let r = s.send("POST", "/v1/runs/run-none/cancel", Some(ops), Some(&why)).await;
        assert_problem(&r, 404, "not_found");

        let r = s.send("GET", "/v1/executions/ex-1/runs", Some(coder), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        let runs: Vec<&str> = r.body["items"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
        assert_eq!(runs, ["run-a", "run-b"]);
        let last = &r.body["items"][1]["events"];
        assert_eq!(last[last.as_array().unwrap().len() - 1]["status"], "cancelled", "{r:?}");

        let r = s.send("GET", "/v1/executions", Some(ops), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["items"][0]["execution"], EXEC);
        assert_eq!(r.body["items"][0]["subject_digest"], sd.as_str());
        assert!(r.body["next"].is_null());
        let r = s.send("GET", "/v1/executions/ex-1", Some(rev), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["subjects"][0]["producer"], "coder");
        assert!(r.headers.contains_key("etag"), "{r:?}");

        // The decision counts the result.
        let r = s.send("POST", "/v1/executions/ex-1/gate-runs", Some(ops), None).await;
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.body["decision"]["outcome"], "pass", "{r:?}");
    })
    .await;
}

/// A request of [`EXEC`] allowing `max` runs, made by the producer; its digest.
async fn capped(s: &Server, coder: &str, max: u64) -> String {
    let body = json!({"execution": EXEC, "budget": {"max_runs": max}});
    let r = s
        .send("POST", "/v1/requests", Some(coder), Some(&body))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    r.body["digest"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_refused_for_the_run_cap_writes_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let (ops, rev, coder) = (w.token("ops"), w.token("rev"), w.token("coder"));
        let doc = subject(1, "diff-1");
        let r = s.send("POST", "/v1/subjects", Some(coder), Some(&doc)).await;
        assert_eq!(r.status, 201, "{r:?}");
        let request = capped(&s, coder, 1).await;
        let admit = |request: &str, verifier: &str, run: &str| {
            json!({"request": request, "verifier": verifier, "class": "reviewer", "run_id": run})
        };
        let r = s.send("POST", "/v1/runs", Some(rev), Some(&admit(&request, "rev", "run-1"))).await;
        assert_eq!(r.status, 201, "{r:?}");
        let (before, denials) = (head_seq(&w).await, w.denials().await.len());
        // Asked again and again, by the verifier for itself and by an operator: a 409 each
        // time, and the audit chain as it was (no lease taken and released, no denial).
        for (token, run) in [(rev, "run-2"), (rev, "run-3"), (ops, "run-4")] {
            let r = s.send("POST", "/v1/runs", Some(token), Some(&admit(&request, "rev", run))).await;
            assert_problem(&r, 409, "conflict");
            assert!(
                r.body["detail"].as_str().unwrap().contains("allows 1 run(s) and 1 were admitted"),
                "{r:?}"
            );
            assert_eq!(events_after(&w, before).await.len(), 0, "{run}");
        }
        assert_eq!(w.denials().await.len(), denials);
        // A refusal of authority on a capped request with runs left writes its denial alone.
        let open = capped(&s, coder, 2).await;
        let before = head_seq(&w).await;
        let r = s.send("POST", "/v1/runs", Some(ops), Some(&admit(&open, "alice", "run-5"))).await;
        assert_denied_once(&w, before, &r, "alice", "permission_denied").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_put_with_a_stale_if_match_is_412_and_moves_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let coder = w.token("coder");
        // Nothing stored yet: no tag matches, not even `*`.
        let r = s
            .send_headers(
                "POST",
                "/v1/subjects",
                Some(coder),
                Some(&subject(1, "d1")),
                &[("if-match", "*")],
            )
            .await;
        assert_problem(&r, 412, "precondition_failed");
        let r = s
            .send("POST", "/v1/subjects", Some(coder), Some(&subject(1, "d1")))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s
            .send("GET", "/v1/executions/ex-1", Some(coder), None)
            .await;
        let first = r.headers["etag"].to_str().unwrap().to_owned();

        let r = s
            .send_headers(
                "POST",
                "/v1/subjects",
                Some(coder),
                Some(&subject(2, "d2")),
                &[("if-match", &first)],
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s
            .send("GET", "/v1/executions/ex-1", Some(coder), None)
            .await;
        let second = r.headers["etag"].to_str().unwrap().to_owned();
        assert_ne!(first, second);

        // A client that read generation 1 tries to move the execution past generation 2.
        let before = head_seq(&w).await;
        let r = s
            .send_headers(
                "POST",
                "/v1/subjects",
                Some(coder),
                Some(&subject(3, "d3")),
                &[("if-match", &first)],
            )
            .await;
        assert_problem(&r, 412, "precondition_failed");
        assert_eq!(r.body["retryable"], false);
        assert_eq!(head_seq(&w).await, before, "a refused put wrote");
        assert_eq!(
            w.engine
                .execution_head(&w.ops, EXEC)
                .await
                .unwrap()
                .unwrap()
                .generation,
            2
        );
        // A weak tag never matches If-Match.
        let weak = format!("W/{second}");
        let r = s
            .send_headers(
                "POST",
                "/v1/subjects",
                Some(coder),
                Some(&subject(3, "d3")),
                &[("if-match", &weak)],
            )
            .await;
        assert_problem(&r, 412, "precondition_failed");
        let r = s
            .send_headers(
                "POST",
                "/v1/subjects",
                Some(coder),
                Some(&subject(3, "d3")),
                &[("if-match", &second)],
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_or_huge_if_match_is_refused_saying_so_in_a_bounded_detail() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let coder = w.token("coder");
        let r = s
            .send("POST", "/v1/subjects", Some(coder), Some(&subject(1, "d1")))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let before = head_seq(&w).await;
        // Under the attack the first detail said "is not at  but at", and the second
        // repeated all 10,000 tags.
        let many = vec!["\"sha256:0#1\""; 10_000].join(", ");
        for (if_match, says) in [
            (
                "",
                "an empty If-Match names no version; execution \"ex-1\" is at \"sha256:",
            ),
            (" , ", "an empty If-Match names no version"),
            (many.as_str(), "and 9996 more but at \"sha256:"),
        ] {
            let r = s
                .send_headers(
                    "POST",
                    "/v1/subjects",
                    Some(coder),
                    Some(&subject(2, "d2")),
                    &[("if-match", if_match)],
                )
                .await;
            assert_problem(&r, 412, "precondition_failed");
            let detail = r.body["detail"].as_str().unwrap();
            assert!(detail.contains(says), "{detail}");
            assert!(detail.len() < 1024, "{} bytes: {detail}", detail.len());
        }
        assert_eq!(head_seq(&w).await, before, "a refused put wrote");
    })
    .await;
}

/// Writers that all read the same version and race to move the pointer with it as `If-Match`:
/// the engine compares the version with the state its compare-and-set moves from, so exactly
/// one moves it and every other gets a 412 (never a 409 or a second move), for an execution's
/// subject and for the gate's policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_with_the_same_if_match_one_wins_and_the_rest_get_412() {
    const WRITERS: usize = 6;
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let (coder, ops) = (w.token("coder"), w.token("ops"));
        let r = s
            .send("POST", "/v1/subjects", Some(coder), Some(&subject(1, "d1")))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s
            .send("GET", "/v1/executions/ex-1", Some(coder), None)
            .await;
        let tag = r.headers["etag"].to_str().unwrap().to_owned();
        let if_match = [("if-match", tag.as_str())];
        let subjects: Vec<_> = (0..WRITERS)
            .map(|i| subject(2, &format!("racer-{i}")))
            .collect();
        let replies =
            futures_util::future::join_all(subjects.iter().map(|doc| {
                s.send_headers("POST", "/v1/subjects", Some(coder), Some(doc), &if_match)
            }))
            .await;
        let won: Vec<_> = replies.iter().filter(|r| r.status == 201).collect();
        assert_eq!(won.len(), 1, "{replies:#?}");
        for r in replies.iter().filter(|r| r.status != 201) {
            assert_problem(r, 412, "precondition_failed");
        }
        let head = w
            .engine
            .execution_head(&w.ops, EXEC)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(head.generation, 2);
        assert_eq!(
            head.subject_digest.as_str(),
            won[0].body["digest"].as_str().unwrap()
        );

        let r = s.send("GET", "/v1/gate/policy", Some(ops), None).await;
        let tag = r.headers["etag"].to_str().unwrap().to_owned();
        let if_match = [("if-match", tag.as_str())];
        let policies: Vec<_> = (0..WRITERS)
            .map(|i| {
                let mut p = policy();
                p["revision"] = json!(2);
                p["required_checks"] = json!([format!("check-{i}")]);
                p
            })
            .collect();
        let replies =
            futures_util::future::join_all(policies.iter().map(|doc| {
                s.send_headers("PUT", "/v1/gate/policy", Some(ops), Some(doc), &if_match)
            }))
            .await;
        let won: Vec<_> = replies.iter().filter(|r| r.status == 200).collect();
        assert_eq!(won.len(), 1, "{replies:#?}");
        for r in replies.iter().filter(|r| r.status != 200) {
            assert_problem(r, 412, "precondition_failed");
        }
        let head = w.engine.gate_policy_head(&w.ops).await.unwrap().unwrap();
        assert_eq!(head.revision, 2);
        assert_eq!(
            head.policy_digest.as_str(),
            won[0].body["policy_digest"].as_str().unwrap()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_are_read_by_execution_and_by_id_within_read_scope() {
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
        // In scope: no finding filed yet.
        let r = s
            .send(
                "GET",
                "/v1/executions/ex-1/findings",
                Some(w.token("rev")),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["items"], serde_json::json!([]));
        // Out of scope: 403 and exactly one audit event, the denial.
        let token = w
            .engine
            .add_principal(&w.ops, "rev-2", verdict_core::contracts::Role::Verifier)
            .await
            .unwrap();
        let before = head_seq(&w).await;
        let r = s
            .send("GET", "/v1/executions/ex-1/findings", Some(&token), None)
            .await;
        assert_denied_once(&w, before, &r, "rev-2", "permission_denied").await;
        // A finding never stored is not found.
        let r = s
            .send("GET", "/v1/findings/f-none", Some(w.token("ops")), None)
            .await;
        assert_problem(&r, 404, "not_found");
    })
    .await;
}
