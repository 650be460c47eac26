//! The reads the command line's `--server` makes for its exports, the ledger and a subject's
//! blobs, and the pages of a finding's versions; each body on SQLite and on PostgreSQL. Every
//! item comes exactly once across pages; a malformed cursor or limit is a 400 problem; a
//! caller out of scope is refused with its reason code and the refusal recorded, once.

use crate::common::*;
use serde_json::{Value, json};
use verdict_core::contracts::Role;
use verdict_core::digest::{DigestKind, digest};
use verdict_server::AppState;

/// Walks a paginated list from `first` by its `next` links; every item, and how many pages.
async fn walk(s: &Server, first: &str, token: &str) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut pages = 0;
    let mut next = Some(first.to_owned());
    while let Some(path) = next.take() {
        let r = s.send("GET", &path, Some(token), None).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        let page = r.body["items"].as_array().unwrap();
        assert!(!page.is_empty(), "{path}: an empty page: {r:?}");
        items.extend(page.iter().cloned());
        pages += 1;
        next = r.body["next"].as_str().map(str::to_owned);
        // The Link header names the same next page as the body.
        match &next {
            Some(n) => {
                let link = r.headers["link"].to_str().unwrap();
                assert_eq!(link, format!("<{n}>; rel=\"next\""), "{r:?}");
            }
            None => assert!(r.headers.get("link").is_none(), "{r:?}"),
        }
    }
    (items, pages)
}

/// A subject of a resource and three checks (five named digests), and a passing decision on
/// it with a finding stored in three versions. The subject's digest.
async fn decided(w: &World, s: &Server) -> String {
    let mut doc = subject(1, "d");
    // The commit the exports are about: a decision is posted only on a commit its subject names.
    doc["work_items"] = json!([{"kind": "commit", "id": "repo", "version": "b".repeat(40)}]);
    doc["checks"] = json!([
        {"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]},
        {"id": "lint", "definition_digest": DEF, "criteria": ["tests-pass"]},
        {"id": "diff", "definition_digest": DEF, "criteria": ["tests-pass"]},
    ]);
    let sd = digest(DigestKind::Subject, &doc);
    let r = s
        .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&doc))
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
            Some(w.token("coder")),
            Some(&json!({"execution": EXEC})),
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let request = r.body["digest"].as_str().unwrap().to_owned();
    let admit =
        json!({"request": request, "verifier": "rev", "class": "reviewer", "run_id": "run-a"});
    let r = s
        .send("POST", "/v1/runs", Some(w.token("rev")), Some(&admit))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let ev_id = ev["id"].as_str().unwrap();
    let mut res = result("run-a", &sd, 1, ev_id);
    res["findings"] = (1..=3)
        .map(|v| {
            json!({"id": "f-1", "version": v, "criterion": "tests-pass",
                   "type": "naming", "severity": "minor", "scope": "change",
                   "subject_digest": sd.as_str(), "evidence_refs": [ev_id],
                   "method": "review"})
        })
        .collect();
    let r = s
        .send("POST", "/v1/results", Some(w.token("rev")), Some(&res))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = s
        .send(
            "POST",
            &format!("/v1/executions/{EXEC}/gate-runs"),
            Some(w.token("ci")),
            None,
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    sd.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subjects_blobs_and_a_findings_versions_come_in_pages_each_item_once() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let sd = decided(&w, &s).await;
        let rev = w.token("rev");
        for (base, count) in [
            (format!("/v1/subjects/{sd}/blobs"), 5),
            ("/v1/findings/f-1".to_owned(), 3),
        ] {
            let all = s.send("GET", &base, Some(rev), None).await;
            assert_eq!(all.status, 200, "{all:?}");
            let everything = all.body["items"].as_array().unwrap().clone();
            assert_eq!(everything.len(), count, "{all:?}");
            assert!(all.body["next"].is_null(), "{all:?}");
            // Pages of every size: the same items, in the same order, each once.
            for limit in 1..=count {
                let (items, pages) = walk(&s, &format!("{base}?limit={limit}"), rev).await;
                assert_eq!(items, everything, "{base} limit {limit}");
                assert_eq!(pages, count.div_ceil(limit), "{base} limit {limit}");
            }
            // A malformed or unknown cursor, a limit out of bounds or not a number, an
            // unknown parameter: 400, a problem document.
            for bad in [
                "?after=nope",
                "?after=",
                "?limit=0",
                "?limit=501",
                "?limit=-1",
                "?limit=two",
                "?page=2",
            ] {
                let r = s
                    .send("GET", &format!("{base}{bad}"), Some(rev), None)
                    .await;
                assert_problem(&r, 400, "invalid_query");
            }
        }
        // The subject's named digests come in its order: the objective, the resource, the
        // checks, a resource and a check sharing a name ("diff") each listed once.
        let (items, _) = walk(&s, &format!("/v1/subjects/{sd}/blobs?limit=2"), rev).await;
        let names: Vec<(&str, &str)> = items
            .iter()
            .map(|b| (b["kind"].as_str().unwrap(), b["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            names,
            [
                ("objective", "objective"),
                ("resource", "diff"),
                ("check_definition", "unit-tests"),
                ("check_definition", "lint"),
                ("check_definition", "diff"),
            ]
        );
        // The versions are the finding's, oldest first.
        let (items, _) = walk(&s, "/v1/findings/f-1?limit=1", rev).await;
        let versions: Vec<u64> = items
            .iter()
            .map(|f| f["finding"]["version"].as_u64().unwrap())
            .collect();
        assert_eq!(versions, [1, 2, 3]);

        // A verifier without a grant on the execution: refused once, with a cursor or without.
        let token = w
            .engine
            .add_principal(&w.ops, "rev-2", Role::Verifier)
            .await
            .unwrap();
        for path in [
            format!("/v1/subjects/{sd}/blobs"),
            format!("/v1/subjects/{sd}/blobs?limit=1&after=0"),
            "/v1/findings/f-1".to_owned(),
            "/v1/findings/f-1?limit=1".to_owned(),
        ] {
            let before = head_seq(&w).await;
            let r = s.send("GET", &path, Some(&token), None).await;
            assert_denied_once(&w, before, &r, "rev-2", "permission_denied").await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_and_the_ledger_answer_as_the_engine_for_readers_only() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        decided(&w, &s).await;
        let rev = w.engine.authenticate(w.token("rev")).await.unwrap();

        // JUnit: the engine's report byte for byte, as XML never sniffed.
        let junit = w.engine.junit(&rev, EXEC).await.unwrap();
        let resp = s
            .client
            .get(format!("{}/v1/executions/{EXEC}/export/junit", s.base))
            .bearer_auth(w.token("rev"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(
            resp.headers()["content-type"],
            "application/xml; charset=utf-8"
        );
        assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
        assert_eq!(resp.text().await.unwrap(), junit);
        assert!(junit.contains("<testsuite"), "{junit}");

        // GitHub: the engine's payloads.
        let sha = "b".repeat(40);
        let expected = w.engine.github_payloads(&rev, EXEC, &sha).await.unwrap();
        let path = format!("/v1/executions/{EXEC}/export/github?head_sha={sha}");
        let r = s.send("GET", &path, Some(w.token("rev")), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body, serde_json::to_value(&expected).unwrap());
        assert_eq!(r.body["commit_status"]["state"], "success", "{r:?}");
        // Another commit gets no success.
        let other = "c".repeat(40);
        let r = s
            .send(
                "GET",
                &format!("/v1/executions/{EXEC}/export/github?head_sha={other}"),
                Some(w.token("rev")),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["commit_status"]["state"], "failure", "{r:?}");
        // A head SHA that is not one is refused by the engine; a missing or unknown query
        // parameter is a 400.
        let r = s
            .send(
                "GET",
                &format!("/v1/executions/{EXEC}/export/github?head_sha=nothex"),
                Some(w.token("rev")),
                None,
            )
            .await;
        assert_problem(&r, 422, "invalid_input");
        for bad in ["", "?sha=abc", &format!("?head_sha={sha}&x=1")] {
            let r = s
                .send(
                    "GET",
                    &format!("/v1/executions/{EXEC}/export/github{bad}"),
                    Some(w.token("rev")),
                    None,
                )
                .await;
            assert_problem(&r, 400, "invalid_query");
        }

        // The ledger: the operator's, as the engine computes it over the same window.
        let window = verdict_engine::ledger::Window {
            attempts: 5,
            days: 7,
            min_sample: 1,
        };
        let expected = w.engine.ledger(&w.ops, window).await.unwrap();
        let r = s
            .send(
                "GET",
                "/v1/ledger?attempts=5&days=7&min_sample=1",
                Some(w.token("ops")),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let mut got = r.body.clone();
        let mut want = serde_json::to_value(&expected).unwrap();
        // Each is computed at its own moment on the store's clock.
        got["now"] = Value::Null;
        want["now"] = Value::Null;
        assert_eq!(got, want);
        assert_eq!(r.body["window"]["attempts"], 5, "{r:?}");
        let r = s
            .send("GET", "/v1/ledger", Some(w.token("ops")), None)
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            r.body["window"],
            serde_json::to_value(verdict_engine::ledger::DEFAULT_WINDOW).unwrap()
        );
        for bad in ["?days=-1", "?attempts=x", "?window=3"] {
            let r = s
                .send(
                    "GET",
                    &format!("/v1/ledger{bad}"),
                    Some(w.token("ops")),
                    None,
                )
                .await;
            assert_problem(&r, 400, "invalid_query");
        }

        // Out of scope: each refused with its reason code, the refusal recorded once and
        // nothing else written.
        let stranger = w
            .engine
            .add_principal(&w.ops, "rev-2", Role::Verifier)
            .await
            .unwrap();
        for (token, who, path) in [
            (
                stranger.as_str(),
                "rev-2",
                format!("/v1/executions/{EXEC}/export/junit"),
            ),
            (
                stranger.as_str(),
                "rev-2",
                format!("/v1/executions/{EXEC}/export/github?head_sha={sha}"),
            ),
            (w.token("rev"), "rev", "/v1/ledger".to_owned()),
            (w.token("coder"), "coder", "/v1/ledger".to_owned()),
        ] {
            let before = head_seq(&w).await;
            let r = s.send("GET", &path, Some(token), None).await;
            assert_denied_once(&w, before, &r, who, "permission_denied").await;
        }
        // No token at all: 401.
        let r = s.send("GET", "/v1/ledger", None, None).await;
        assert_problem(&r, 401, "unauthenticated");
    })
    .await;
}

/// What a client can tell apart in an answer: the status, every header but the request's own
/// id and the date, and the body byte for byte.
async fn seen(
    s: &Server,
    method: &str,
    path: &str,
    token: &str,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = s
        .client
        .request(method.clone(), format!("{}{path}", s.base))
        .bearer_auth(token);
    if method == reqwest::Method::POST {
        req = req.header("content-type", "application/json").body("{}");
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let mut headers: Vec<(String, String)> = resp
        .headers()
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "x-request-id" | "date"))
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    headers.sort();
    (status, headers, resp.bytes().await.unwrap().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_out_of_scope_is_the_same_for_a_record_that_exists_and_one_that_does_not() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let sd = decided(&w, &s).await;
        let key = w
            .engine
            .status(&w.ops, EXEC)
            .await
            .unwrap()
            .applicable
            .unwrap()
            .decision
            .evaluation_key
            .unwrap()
            .to_string();
        let r = s
            .send(
                "POST",
                "/v1/requests",
                Some(w.token("coder")),
                Some(&json!({"execution": EXEC})),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let request = r.body["digest"].as_str().unwrap().to_owned();
        let unknown = digest(DigestKind::Subject, &json!({"never": "stored"})).to_string();
        let rev2 = w
            .engine
            .add_principal(&w.ops, "rev-2", Role::Verifier)
            .await
            .unwrap();
        let coder2 = w
            .engine
            .add_principal(&w.ops, "coder-2", Role::Producer)
            .await
            .unwrap();
        let head = "b".repeat(40);

        // Each route that reads a record by id, with a stored id and one of the same length
        // that names nothing; the id is put where `{}` is.
        let routes: Vec<(&str, String, &str, &str, &str)> = vec![
            (
                "GET",
                "/v1/executions/{}".into(),
                EXEC,
                "ex-9",
                rev2.as_str(),
            ),
            (
                "GET",
                "/v1/executions/{}/status".into(),
                EXEC,
                "ex-9",
                rev2.as_str(),
            ),
            (
                "GET",
                "/v1/executions/{}/history".into(),
                EXEC,
                "ex-9",
                rev2.as_str(),
            ),
            (
                "GET",
                "/v1/executions/{}/runs".into(),
                EXEC,
                "ex-9",
                rev2.as_str(),
            ),
            (
                "GET",
                "/v1/executions/{}/findings".into(),
                EXEC,
                "ex-9",
                rev2.as_str(),
            ),
            (
                "GET",
                "/v1/executions/{}/export/junit".into(),
                EXEC,
                "ex-9",
                rev2.as_str(),
            ),
            (
                "GET",
                format!("/v1/executions/{{}}/export/github?head_sha={head}"),
                EXEC,
                "ex-9",
                rev2.as_str(),
            ),
            ("GET", "/v1/runs/{}".into(), "run-a", "run-z", rev2.as_str()),
            (
                "GET",
                "/v1/runs/{}/context".into(),
                "run-a",
                "run-z",
                rev2.as_str(),
            ),
            ("GET", "/v1/findings/{}".into(), "f-1", "f-9", rev2.as_str()),
            (
                "GET",
                "/v1/subjects/{}/blobs".into(),
                sd.as_str(),
                unknown.as_str(),
                rev2.as_str(),
            ),
            (
                "GET",
                "/v1/gate/decisions/{}/replay".into(),
                key.as_str(),
                unknown.as_str(),
                rev2.as_str(),
            ),
            (
                "POST",
                "/v1/requests/{}/jobs".into(),
                request.as_str(),
                unknown.as_str(),
                coder2.as_str(),
            ),
        ];
        for (method, route, stored, missing, token) in routes {
            let at = |id: &str| route.replacen("{}", id, 1);
            let before = head_seq(&w).await;
            let (status, headers, body) = seen(&s, method, &at(stored), token).await;
            // Refused, and recorded as a denial, as every refusal of authority is.
            assert_eq!(status, 403, "{route}: {}", String::from_utf8_lossy(&body));
            let problem: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(problem["code"], "permission_denied", "{route}: {problem}");
            let after = events_after(&w, before).await;
            assert_eq!(after.len(), 1, "{route}: {after:?}");
            assert_eq!(after[0].table, "denials", "{route}");
            // The same request for an id that names nothing: the same answer, but for the id
            // it repeats, and the same one denial.
            let before = head_seq(&w).await;
            let (status2, headers2, body2) = seen(&s, method, &at(missing), token).await;
            let body2 = String::from_utf8(body2).unwrap().replace(missing, stored);
            assert_eq!(
                (status2, &headers2, body2.as_str()),
                (status, &headers, String::from_utf8(body).unwrap().as_str()),
                "{route}: an id that names nothing is answered differently"
            );
            let after = events_after(&w, before).await;
            assert_eq!(after.len(), 1, "{route}: {after:?}");
            assert_eq!(after[0].table, "denials", "{route}");
        }

        // An operator, who may read everything, is told what is not stored.
        for path in [
            "/v1/executions/ex-9".to_owned(),
            "/v1/runs/run-z".to_owned(),
            "/v1/runs/run-z/context".to_owned(),
            "/v1/findings/f-9".to_owned(),
            format!("/v1/subjects/{unknown}/blobs"),
            format!("/v1/gate/decisions/{unknown}/replay"),
        ] {
            let r = s.send("GET", &path, Some(w.token("ops")), None).await;
            assert_problem(&r, 404, "not_found");
        }
    })
    .await;
}

/// [`seen`] for a write with a JSON body.
async fn seen_posting(
    s: &Server,
    path: &str,
    token: &str,
    body: &str,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let resp = s
        .client
        .post(format!("{}{path}", s.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let mut headers: Vec<(String, String)> = resp
        .headers()
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "x-request-id" | "date"))
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    headers.sort();
    (status, headers, resp.bytes().await.unwrap().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_out_of_scope_is_refused_the_same_for_a_record_that_exists_and_one_that_does_not() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let sd = decided(&w, &s).await;
        let pd = w
            .engine
            .gate_policy_head(&w.ops)
            .await
            .unwrap()
            .unwrap()
            .policy_digest
            .to_string();
        let r = s
            .send(
                "POST",
                "/v1/requests",
                Some(w.token("coder")),
                Some(&json!({"execution": EXEC})),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let request = r.body["digest"].as_str().unwrap().to_owned();
        let unknown = digest(DigestKind::Subject, &json!({"never": "stored"})).to_string();
        // One principal of each role that writes, none granted anything.
        let mut outsider = std::collections::BTreeMap::new();
        for (name, role) in [
            ("coder-2", Role::Producer),
            ("ci-2", Role::Runner),
            ("rev-2", Role::Verifier),
            ("bob", Role::Human),
        ] {
            let token = w.engine.add_principal(&w.ops, name, role).await.unwrap();
            outsider.insert(name, token);
        }
        let mut ev = evidence(&sd, "pass");
        ev["id"] = json!("ev-outsider");
        ev["produced_by"] = json!({"principal": "ci-2", "role": "runner"});
        let mut res = result("run-a", &sd.parse().unwrap(), 1, "ev-1");
        res["verifier"]["principal"] = json!("rev-2");

        // Each write that names a stored record by id, with a stored id and one of the same
        // length that names nothing; the id is put where `@ID@` is in the path and the body.
        let writes: Vec<(String, String, &str, &str, &str)> = vec![
            (
                "/v1/requests".into(),
                r#"{"execution": "@ID@"}"#.into(),
                EXEC,
                "ex-9",
                "coder-2",
            ),
            (
                "/v1/executions/@ID@/cancel".into(),
                r#"{"reason": "not wanted"}"#.into(),
                EXEC,
                "ex-9",
                "coder-2",
            ),
            (
                "/v1/executions/@ID@/gate-runs".into(),
                String::new(),
                EXEC,
                "ex-9",
                "ci-2",
            ),
            (
                "/v1/human-decisions".into(),
                json!({"execution": "@ID@", "decision": "approve", "reason": "fine",
                       "subject_digest": sd, "policy_digest": pd})
                .to_string(),
                EXEC,
                "ex-9",
                "bob",
            ),
            (
                "/v1/runs".into(),
                json!({"request": "@ID@", "verifier": "rev-2", "class": "reviewer",
                       "run_id": "run-b"})
                .to_string(),
                request.as_str(),
                unknown.as_str(),
                "rev-2",
            ),
            (
                "/v1/results".into(),
                res.to_string().replace("run-a", "@ID@"),
                "run-a",
                "run-z",
                "rev-2",
            ),
            (
                "/v1/evidence".into(),
                json!({"evidence": [ev]}).to_string().replace(&sd, "@ID@"),
                sd.as_str(),
                unknown.as_str(),
                "ci-2",
            ),
            (
                "/v1/requests/@ID@/jobs".into(),
                "{}".into(),
                request.as_str(),
                unknown.as_str(),
                "coder-2",
            ),
        ];
        let check = |phase: &'static str| {
            let (s, w, outsider, writes) = (&s, &w, &outsider, &writes);
            async move {
                for (route, body, stored, missing, who) in writes {
                    let token = outsider[who].as_str();
                    let at = |id: &str| (route.replace("@ID@", id), body.replace("@ID@", id));
                    let before = head_seq(w).await;
                    let (path, text) = at(stored);
                    let (status, headers, answer) = seen_posting(s, &path, token, &text).await;
                    // Refused, and recorded as a denial, as every refusal of authority is.
                    let shown = String::from_utf8_lossy(&answer).into_owned();
                    assert_eq!(status, 403, "{phase} {route}: {shown}");
                    let problem: Value = serde_json::from_slice(&answer).unwrap();
                    assert_eq!(problem["code"], "permission_denied", "{phase} {route}");
                    let after = events_after(w, before).await;
                    assert_eq!(after.len(), 1, "{phase} {route}: {after:?}");
                    assert_eq!(after[0].table, "denials", "{phase} {route}");
                    // The same write naming what is not stored: the same answer, but for the id
                    // it repeats, and the same one denial.
                    let before = head_seq(w).await;
                    let (path, text) = at(missing);
                    let (status2, headers2, answer2) = seen_posting(s, &path, token, &text).await;
                    let answer2 = String::from_utf8(answer2).unwrap().replace(missing, stored);
                    assert_eq!(
                        (status2, &headers2, answer2.as_str()),
                        (status, &headers, shown.as_str()),
                        "{phase} {route}: a missing id is answered differently"
                    );
                    let after = events_after(w, before).await;
                    assert_eq!(after.len(), 1, "{phase} {route}: {after:?}");
                    assert_eq!(after[0].table, "denials", "{phase} {route}");
                }
            }
        };
        check("live").await;

        // Cancelled, the execution's state is still told to no one out of its scope.
        let r = s
            .send(
                "POST",
                &format!("/v1/executions/{EXEC}/cancel"),
                Some(w.token("ops")),
                Some(&json!({"reason": "withdrawn"})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        check("cancelled").await;

        // A caller in scope is told the state: the execution was cancelled.
        let r = s
            .send(
                "POST",
                "/v1/requests",
                Some(w.token("coder")),
                Some(&json!({"execution": EXEC})),
            )
            .await;
        assert_problem(&r, 409, "conflict");
        let admit =
            json!({"request": request, "verifier": "rev", "class": "reviewer", "run_id": "run-b"});
        let r = s
            .send("POST", "/v1/runs", Some(w.token("rev")), Some(&admit))
            .await;
        assert_problem(&r, 409, "conflict");
        // An operator, who may see everything, is told what is not stored.
        for (path, body) in [
            ("/v1/requests".to_owned(), json!({"execution": "ex-9"})),
            (
                "/v1/executions/ex-9/cancel".to_owned(),
                json!({"reason": "x"}),
            ),
            (
                "/v1/runs".to_owned(),
                json!({"request": unknown, "verifier": "rev", "class": "reviewer",
                       "run_id": "run-c"}),
            ),
        ] {
            let r = s
                .send("POST", &path, Some(w.token("ops")), Some(&body))
                .await;
            assert_problem(&r, 404, "not_found");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_window_beyond_what_json_holds_exactly_is_an_invalid_query() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let ops = w.token("ops");
        let seq = head_seq(&w).await;
        for name in ["attempts", "days", "min_sample"] {
            for value in ["18446744073709551615", "9007199254740992"] {
                let path = format!("/v1/ledger?{name}={value}");
                let r = s.send("GET", &path, Some(ops), None).await;
                assert_problem(&r, 400, "invalid_query");
                assert!(
                    r.body["detail"].as_str().unwrap().contains(name),
                    "{path}: {r:?}"
                );
            }
            // The largest integer every JSON reader holds is taken, and echoed exactly.
            let path = format!("/v1/ledger?{name}=9007199254740991");
            let r = s.send("GET", &path, Some(ops), None).await;
            assert_eq!(r.status, 200, "{path}: {r:?}");
            assert_eq!(
                r.body["window"][name].as_u64(),
                Some(9_007_199_254_740_991),
                "{path}: {r:?}"
            );
        }
        assert_eq!(head_seq(&w).await, seq, "a ledger read wrote something");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_taking_an_execution_id_reads_it_alike() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let ops = w.token("ops");
        let sha = "b".repeat(40);
        let routes = |id: &str| {
            vec![
                ("GET", format!("/v1/executions/{id}")),
                ("GET", format!("/v1/executions/{id}/status")),
                ("GET", format!("/v1/executions/{id}/history")),
                ("GET", format!("/v1/executions/{id}/runs")),
                ("GET", format!("/v1/executions/{id}/findings")),
                ("GET", format!("/v1/executions/{id}/export/junit")),
                (
                    "GET",
                    format!("/v1/executions/{id}/export/github?head_sha={sha}"),
                ),
                ("POST", format!("/v1/executions/{id}/gate-runs")),
                ("POST", format!("/v1/executions/{id}/cancel")),
            ]
        };
        let reason = json!({"reason": "r"});

        // Not names: an invisible character, a look-alike space, 257 characters. Every route
        // refuses them as one, before the store is asked, writing nothing.
        let long = "a".repeat(257);
        for id in ["a%E2%80%8Bb", "a%C2%A0b", long.as_str()] {
            for (method, path) in routes(id) {
                let seq = head_seq(&w).await;
                let body = (path.ends_with("/cancel")).then_some(&reason);
                let r = s.send(method, &path, Some(ops), body).await;
                assert_problem(&r, 422, "invalid_input");
                assert!(
                    r.body["detail"]
                        .as_str()
                        .unwrap()
                        .contains("is not an execution id"),
                    "{path}: {r:?}"
                );
                assert_eq!(head_seq(&w).await, seq, "{path} wrote something");
            }
        }

        // `x/y` is a name (1 to 256 printable characters), spelt `x%2Fy` in a path: an
        // execution may have it, and every route reads it as any other id.
        w.engine
            .grant(
                &w.ops,
                "g-coder-xy",
                "coder",
                verdict_store::ScopeKind::Execution,
                "x/y",
                verdict_store::Access::Write,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        let mut doc = subject(1, "d");
        doc["execution"]["id"] = json!("x/y");
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&doc))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s.send("GET", "/v1/executions/x%2Fy", Some(ops), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["execution"], "x/y");
        for path in [
            "/v1/executions/x%2Fy/status",
            "/v1/executions/x%2Fy/history",
        ] {
            let r = s.send("GET", path, Some(ops), None).await;
            assert_eq!(r.status, 200, "{path}: {r:?}");
            assert_eq!(r.body["execution"], "x/y", "{path}: {r:?}");
        }
        let r = s
            .send("GET", "/v1/executions/x%2Fy/status", Some(ops), None)
            .await;
        assert!(r.body["head"].is_object(), "{r:?}");

        // An id no subject has: the execution is not found, and neither are its status and
        // its history, so a misspelt id is never read as "no decision yet".
        for path in [
            "/v1/executions/y%2Fz",
            "/v1/executions/y%2Fz/status",
            "/v1/executions/y%2Fz/history",
        ] {
            let r = s.send("GET", path, Some(ops), None).await;
            assert_problem(&r, 404, "not_found");
            assert!(r.body["detail"].as_str().unwrap().contains("y/z"), "{r:?}");
        }
    })
    .await;
}
