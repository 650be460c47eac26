//! The workers' queue over HTTP, the routes the command line's `--server` reads through, and
//! the findings list's pages; each body on SQLite and on PostgreSQL. A request enqueued over
//! HTTP (twice: no second set of jobs) is taken to a decision by `Engine::work_one` alone and
//! the decision read back over HTTP; the queue is the operators'; a stored decision replays;
//! a subject's named digests are listed; malformed input is a 4xx.

use crate::common;

use async_trait::async_trait;
use common::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use verdict_core::contracts::Subject;
use verdict_core::digest::{Digest, DigestKind, digest};
use verdict_engine::{
    ChecksKit, ChecksRun, DEFAULT_BACK_OFF, JobFailure, Principal, WorkOptions, Worked, WorkerRole,
};
use verdict_server::AppState;

/// Passing evidence for the subject's one check, which the engine files as the runner.
struct Runner;

#[async_trait]
impl ChecksKit for Runner {
    async fn run_checks(
        &self,
        _caller: &Principal,
        _subject: &Subject,
        subject_digest: &Digest,
    ) -> Result<ChecksRun, JobFailure> {
        Ok(ChecksRun {
            evidence: vec![evidence(subject_digest.as_str(), "pass")],
            outcome: "1 check".into(),
        })
    }
}

/// A world whose policy requires no model verifier (the checks and the gate are a request's
/// jobs), served, with the producer's subject posted over HTTP.
async fn subject_served(store: Arc<dyn verdict_store::Store>) -> (World, Server) {
    let w = world(store).await;
    let mut policy = policy();
    policy["revision"] = json!(2);
    policy["required_verifiers"] = json!([]);
    w.engine.set_policy(&w.ops, &policy).await.unwrap();
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
    (w, s)
}

fn ids(body: &serde_json::Value) -> Vec<i64> {
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_enqueued_over_http_is_decided_by_workers_and_read_back_over_http() {
    on_both(|store| async move {
        let (w, s) = subject_served(store).await;
        let (ops, coder) = (w.token("ops"), w.token("coder"));
        let r = s
            .send(
                "POST",
                "/v1/requests",
                Some(coder),
                Some(&json!({"execution": EXEC})),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let request = r.body["digest"].as_str().unwrap().to_owned();
        let path = format!("/v1/requests/{request}/jobs");

        // A runner may not enqueue; the refusal is one denial and enqueues nothing.
        let before = head_seq(&w).await;
        let r = s
            .send("POST", &path, Some(w.token("ci")), Some(&json!({})))
            .await;
        assert_denied_once(&w, before, &r, "ci", "permission_denied").await;
        let queue = s.send("GET", "/v1/jobs", Some(ops), None).await;
        assert_eq!(queue.body["items"], json!([]), "{queue:?}");

        // The subject's producer enqueues; again (as the operator) adds nothing.
        let r = s.send("POST", &path, Some(coder), Some(&json!({}))).await;
        assert_eq!(r.status, 200, "{r:?}");
        let kinds: Vec<&str> = r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["checks", "gate"], "{r:?}");
        let first = ids(&r.body);
        let again = s.send("POST", &path, Some(ops), Some(&json!({}))).await;
        assert_eq!(again.status, 200, "{again:?}");
        assert_eq!(ids(&again.body), first);

        // The queue: the operator's, filtered and paged; nobody else's.
        let r = s.send("GET", "/v1/jobs", Some(ops), None).await;
        assert_eq!(ids(&r.body), first, "{r:?}");
        let r = s.send("GET", "/v1/jobs?limit=1", Some(ops), None).await;
        assert_eq!(ids(&r.body), first[..1], "{r:?}");
        let next = r.body["next"].as_str().unwrap().to_owned();
        let r = s.send("GET", &next, Some(ops), None).await;
        assert_eq!(ids(&r.body), first[1..], "{r:?}");
        assert!(r.body["next"].is_null(), "{r:?}");
        let r = s
            .send(
                "GET",
                &format!("/v1/jobs?state=ready&request={request}"),
                Some(ops),
                None,
            )
            .await;
        assert_eq!(ids(&r.body), first, "{r:?}");
        let r = s.send("GET", "/v1/jobs?state=done", Some(ops), None).await;
        assert_eq!(r.body["items"], json!([]), "{r:?}");
        let before = head_seq(&w).await;
        let r = s.send("GET", "/v1/jobs", Some(coder), None).await;
        assert_denied_once(&w, before, &r, "coder", "permission_denied").await;

        // The workers take it to a decision.
        let ci = w.engine.authenticate(w.token("ci")).await.unwrap();
        let o = WorkOptions {
            holder: "test-worker".into(),
            lease: Duration::from_secs(60),
            verifier: None,
            checks: Some(Arc::new(Runner)),
            back_off: DEFAULT_BACK_OFF,
        };
        let checks = w
            .engine
            .work_one(&ci, WorkerRole::Runner, &o)
            .await
            .unwrap();
        assert!(matches!(checks, Worked::Done(_)), "{checks:?}");
        let gated = w
            .engine
            .work_one(&w.ops, WorkerRole::Gate, &o)
            .await
            .unwrap();
        let Worked::Done(job) = gated else {
            panic!("gate job not done: {gated:?}")
        };
        assert!(
            job.outcome.as_deref().unwrap().starts_with("pass sha256:"),
            "{job:?}"
        );

        // Read back over HTTP: the decision applies, and the queue is finished.
        let r = s
            .send(
                "GET",
                &format!("/v1/executions/{EXEC}/status"),
                Some(coder),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["applicable"]["decision"]["outcome"], "pass", "{r:?}");
        let r = s.send("GET", "/v1/jobs?state=done", Some(ops), None).await;
        assert_eq!(ids(&r.body), first, "{r:?}");
        // Enqueuing a finished request again still adds nothing.
        let r = s.send("POST", &path, Some(coder), Some(&json!({}))).await;
        assert_eq!(ids(&r.body), first, "{r:?}");

        // The decision replays, for an operator and for a reader of the execution.
        let key = r_key(&w).await;
        for token in [ops, w.token("rev")] {
            let r = s
                .send(
                    "GET",
                    &format!("/v1/gate/decisions/{key}/replay"),
                    Some(token),
                    None,
                )
                .await;
            assert_eq!(r.status, 200, "{r:?}");
            assert_eq!(r.body["decision"]["evaluation_key"], key.as_str(), "{r:?}");
        }
    })
    .await;
}

/// `POST /v1/requests` with `jobs` stores the request and its jobs in one transaction and
/// answers with both; without it the answer is the digest alone, as it always was. A caller
/// who may not enqueue, or a deadline out of bounds, stores neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_posted_with_its_jobs_is_stored_with_them_or_not_at_all() {
    on_both(|store| async move {
        let (w, s) = subject_served(store).await;
        let (ops, coder) = (w.token("ops"), w.token("coder"));
        let with_jobs = json!({"execution": EXEC, "jobs": {"deadline_seconds": 600}});

        // A runner may not: one denial, no request, no job.
        let before = head_seq(&w).await;
        let r = s
            .send(
                "POST",
                "/v1/requests",
                Some(w.token("ci")),
                Some(&with_jobs),
            )
            .await;
        assert_denied_once(&w, before, &r, "ci", "permission_denied").await;
        // Out of bounds or malformed: refused before anything is written.
        for (body, status) in [
            (
                json!({"execution": EXEC, "jobs": {"deadline_seconds": 0}}),
                422,
            ),
            (json!({"execution": EXEC, "jobs": {"later": true}}), 422),
            (json!({"execution": EXEC, "jobs": 5}), 422),
        ] {
            let before = head_seq(&w).await;
            let r = s
                .send("POST", "/v1/requests", Some(coder), Some(&body))
                .await;
            assert_eq!(r.status, status, "{body}: {r:?}");
            assert!(
                r.content_type.starts_with("application/problem+json"),
                "{r:?}"
            );
            assert_eq!(head_seq(&w).await, before, "{body}: nothing written");
        }
        let queue = s.send("GET", "/v1/jobs", Some(ops), None).await;
        assert_eq!(queue.body["items"], json!([]), "{queue:?}");

        // The subject's producer: the request and its jobs, in one answer.
        let r = s
            .send("POST", "/v1/requests", Some(coder), Some(&with_jobs))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let request = r.body["digest"].as_str().unwrap().to_owned();
        let jobs = r.body["jobs"].as_array().unwrap();
        assert_eq!(
            jobs.iter()
                .map(|j| (j["kind"].as_str().unwrap(), j["request"].as_str().unwrap()))
                .collect::<Vec<_>>(),
            [("checks", request.as_str()), ("gate", request.as_str())],
            "{r:?}"
        );
        let listed = s
            .send(
                "GET",
                &format!("/v1/jobs?request={request}"),
                Some(ops),
                None,
            )
            .await;
        assert_eq!(
            ids(&listed.body),
            ids(&json!({"items": jobs})),
            "{listed:?}"
        );
        // Without `jobs`: the digest alone, and the same request.
        let r = s
            .send(
                "POST",
                "/v1/requests",
                Some(coder),
                Some(&json!({"execution": EXEC})),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.body, json!({"digest": request}), "{r:?}");
    })
    .await;
}

/// The evaluation key of the execution's current applicable decision.
async fn r_key(w: &World) -> String {
    let status = w.engine.status(&w.ops, EXEC).await.unwrap();
    status
        .applicable
        .unwrap()
        .decision
        .evaluation_key
        .unwrap()
        .as_str()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_routes_refuse_malformed_input_with_a_4xx() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let ops = w.token("ops");
        let unknown = format!("sha256:{}", "0".repeat(64));
        for (method, path, body, status) in [
            (
                "POST",
                "/v1/requests/nope/jobs".to_owned(),
                Some(json!({})),
                422,
            ),
            (
                "POST",
                format!("/v1/requests/{unknown}/jobs"),
                Some(json!({})),
                404,
            ),
            (
                "POST",
                format!("/v1/requests/{unknown}/jobs"),
                Some(json!({"deadline_seconds": 0})),
                422,
            ),
            (
                "POST",
                format!("/v1/requests/{unknown}/jobs"),
                Some(json!({"deadline_seconds": 315_360_001_u64})),
                422,
            ),
            // Beyond what the strict reader takes as an integer: refused as malformed.
            (
                "POST",
                format!("/v1/requests/{unknown}/jobs"),
                Some(json!({"deadline_seconds": u64::MAX})),
                400,
            ),
            (
                "POST",
                format!("/v1/requests/{unknown}/jobs"),
                Some(json!({"later": true})),
                422,
            ),
            ("GET", "/v1/jobs?state=lost".to_owned(), None, 400),
            ("GET", "/v1/jobs?request=nope".to_owned(), None, 400),
            ("GET", "/v1/jobs?after=99".to_owned(), None, 400),
            ("GET", "/v1/jobs?limit=0".to_owned(), None, 400),
            ("GET", "/v1/gates?limit=501".to_owned(), None, 400),
            (
                "GET",
                "/v1/gate/decisions/nope/replay".to_owned(),
                None,
                422,
            ),
            (
                "GET",
                format!("/v1/gate/decisions/{unknown}/replay"),
                None,
                404,
            ),
            ("GET", "/v1/subjects/nope/blobs".to_owned(), None, 422),
            ("GET", format!("/v1/subjects/{unknown}/blobs"), None, 404),
        ] {
            let r = s.send(method, &path, Some(ops), body.as_ref()).await;
            assert_eq!(r.status, status, "{method} {path}: {r:?}");
            assert!(
                r.content_type.starts_with("application/problem+json"),
                "{method} {path}: {r:?}"
            );
        }
        // Without a token: 401 on each.
        for (method, path) in [
            ("GET", "/v1/jobs"),
            ("GET", "/v1/gates"),
            ("POST", "/v1/requests/nope/jobs"),
        ] {
            let r = s.send(method, path, None, Some(&json!({}))).await;
            assert_eq!(r.status, 401, "{method} {path}: {r:?}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gates_and_a_subjects_named_digests_are_listed_for_readers() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let doc = subject(1, "d");
        let sd = digest(DigestKind::Subject, &doc);
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&doc))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s.send("GET", "/v1/gates", Some(w.token("rev")), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["items"][0]["gate"], "merge", "{r:?}");
        assert_eq!(r.body["items"][0]["revision"], 1, "{r:?}");

        let path = format!("/v1/subjects/{sd}/blobs");
        let r = s.send("GET", &path, Some(w.token("rev")), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        let names: Vec<&str> = r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["objective", "diff", "unit-tests"], "{r:?}");
        assert_eq!(r.body["items"][1]["stored"], false, "{r:?}");
        // A verifier with no grant on the execution: refused, one denial.
        let token = w
            .engine
            .add_principal(&w.ops, "rev-2", verdict_core::contracts::Role::Verifier)
            .await
            .unwrap();
        let before = head_seq(&w).await;
        let r = s.send("GET", &path, Some(&token), None).await;
        assert_denied_once(&w, before, &r, "rev-2", "permission_denied").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executions_findings_come_in_pages() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let (coder, rev) = (w.token("coder"), w.token("rev"));
        let doc = subject(1, "d");
        let sd = digest(DigestKind::Subject, &doc);
        let r = s
            .send("POST", "/v1/subjects", Some(coder), Some(&doc))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
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
        let r = s
            .send(
                "POST",
                "/v1/requests",
                Some(coder),
                Some(&json!({"execution": EXEC})),
            )
            .await;
        let request = r.body["digest"].as_str().unwrap().to_owned();
        let admit =
            json!({"request": request, "verifier": "rev", "class": "reviewer", "run_id": "run-a"});
        let r = s.send("POST", "/v1/runs", Some(rev), Some(&admit)).await;
        assert_eq!(r.status, 201, "{r:?}");
        let ev_id = ev["id"].as_str().unwrap();
        let mut res = result("run-a", &sd, 1, ev_id);
        res["criteria"][0]["status"] = json!("failed");
        res["findings"] = (1..=3)
            .map(|i| {
                json!({"id": format!("f-{i}"), "version": 1, "criterion": "tests-pass",
                       "type": "unbounded_retry", "severity": "major", "scope": "change",
                       "subject_digest": sd.as_str(), "evidence_refs": [ev_id],
                       "method": "review"})
            })
            .collect();
        let r = s.send("POST", "/v1/results", Some(rev), Some(&res)).await;
        assert_eq!(r.status, 201, "{r:?}");

        let base = format!("/v1/executions/{EXEC}/findings");
        let all = s.send("GET", &base, Some(rev), None).await;
        assert_eq!(all.status, 200, "{all:?}");
        let everything = all.body["items"].as_array().unwrap().clone();
        assert_eq!(everything.len(), 3, "{all:?}");
        assert!(all.body["next"].is_null(), "{all:?}");
        // Two pages of two: the second starts after the first's last digest and has no next.
        let first = s
            .send("GET", &format!("{base}?limit=2"), Some(rev), None)
            .await;
        assert_eq!(first.status, 200, "{first:?}");
        assert_eq!(first.body["items"].as_array().unwrap()[..], everything[..2]);
        let next = first.body["next"].as_str().unwrap().to_owned();
        let link = first.headers.get("link").unwrap().to_str().unwrap();
        assert!(link.contains("rel=\"next\""), "{first:?}");
        let second = s.send("GET", &next, Some(rev), None).await;
        assert_eq!(second.status, 200, "{second:?}");
        assert_eq!(
            second.body["items"].as_array().unwrap()[..],
            everything[2..]
        );
        assert!(second.body["next"].is_null(), "{second:?}");
        // A cursor naming no finding, and a limit out of bounds: 400.
        for bad in ["?after=sha256:nope", "?limit=0", "?limit=501", "?page=2"] {
            let r = s
                .send("GET", &format!("{base}{bad}"), Some(rev), None)
                .await;
            assert_problem(&r, 400, "invalid_query");
        }
    })
    .await;
}
