//! Blobs over HTTP: `PUT` and `GET /v1/blobs/{digest}` on a real server on loopback, SQLite
//! and PostgreSQL: a round trip with the headers that keep a browser from rendering a blob,
//! bytes that do not hash to the digest and bytes over the limit refused with nothing stored,
//! a verifier's or a human's put refused and recorded, and a read out of scope answered like a
//! blob that is not stored; a grant on an execution or a mission reads what that scope's
//! subjects name, and nothing else; a subject names only stored bytes its producer may read.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common::*;
use serde_json::json;
use verdict_server::AppState;

/// A raw request: status, headers and the body's bytes (a blob is not JSON).
async fn raw(
    s: &Server,
    method: &str,
    path: &str,
    token: &str,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let resp = s
        .client
        .request(method, format!("{}{path}", s.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.bytes().await.unwrap().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_round_trips_and_every_refusal_stores_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let diff = "diff --git a/lib.rs b/lib.rs\n+fn added() {}\n";
        let digest = verdict_core::digest::raw(diff.as_bytes()).to_string();
        let path = format!("/v1/blobs/{digest}");
        let put = |token: &'static str, bytes: Vec<u8>, at: String| {
            let s = &s;
            let w = &w;
            async move {
                s.send_raw(
                    "PUT",
                    &at,
                    Some(w.token(token)),
                    Some((bytes, "text/x-diff")),
                )
                .await
            }
        };

        // Bytes that do not hash to the digest named: 422, naming both, nothing stored.
        let before = head_seq(&w).await;
        let r = put("coder", b"other bytes".to_vec(), path.clone()).await;
        assert_problem(&r, 422, "invalid_input");
        let detail = r.body["detail"].as_str().unwrap();
        assert!(detail.contains(&digest), "{detail}");
        assert!(
            detail.contains(verdict_core::digest::raw(b"other bytes").as_str()),
            "{detail}"
        );
        // A malformed digest is refused the same way.
        let r = put("coder", b"x".to_vec(), "/v1/blobs/sha256:nothex".into()).await;
        assert_problem(&r, 422, "invalid_input");
        // Over the limit: 413 before the engine is asked.
        let big = vec![b'x'; verdict_store::MAX_BLOB_BYTES + 1];
        let big_path = format!("/v1/blobs/{}", verdict_core::digest::raw(&big));
        let r = put("coder", big, big_path).await;
        assert_problem(&r, 413, "payload_too_large");
        assert_eq!(head_seq(&w).await, before, "a refused put wrote something");
        let (status, _, _) = raw(&s, "GET", &path, w.token("ops")).await;
        assert_eq!(status, 404);

        // A verifier or a human may not put: 403 and exactly one audit event, its denial.
        for (who, code) in [("rev", "permission_denied"), ("alice", "permission_denied")] {
            let before = head_seq(&w).await;
            let r = put(who, diff.as_bytes().to_vec(), path.clone()).await;
            assert_denied_once(&w, before, &r, who, code).await;
        }

        // The producer puts the bytes: 201, then the same bytes again: 200 and nothing new.
        let r = put("coder", diff.as_bytes().to_vec(), path.clone()).await;
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.body["digest"], json!(digest));
        assert_eq!(r.body["size"], json!(diff.len()));
        assert_eq!(r.body["media_type"], json!("text/x-diff"));
        assert_eq!(r.body["writer"], json!("coder"));
        assert_eq!(r.headers["etag"], format!("\"{digest}\"").as_str());
        // Another principal putting the same bytes is recorded once as holding them (one
        // event, no second copy of the bytes); its writer or it again records nothing.
        let before = head_seq(&w).await;
        let r = put("ci", diff.as_bytes().to_vec(), path.clone()).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["writer"], json!("coder"));
        let after = events_after(&w, before).await;
        assert_eq!(after.len(), 1, "{after:?}");
        assert_eq!(
            (after[0].table.as_str(), after[0].principal.as_str()),
            ("blob_holders", "ci")
        );
        let before = head_seq(&w).await;
        for who in ["ci", "coder"] {
            let r = put(who, diff.as_bytes().to_vec(), path.clone()).await;
            assert_eq!(r.status, 200, "{r:?}");
        }
        assert_eq!(head_seq(&w).await, before);

        // Its writer and an operator read it back, as an attachment never sniffed.
        for who in ["coder", "ops"] {
            let (status, headers, bytes) = raw(&s, "GET", &path, w.token(who)).await;
            assert_eq!(status, 200, "{who}");
            assert_eq!(bytes, diff.as_bytes());
            assert_eq!(headers["etag"], format!("\"{digest}\"").as_str());
            assert_eq!(headers["content-type"], "text/x-diff");
            assert_eq!(headers["x-content-type-options"], "nosniff");
            assert_eq!(headers["content-disposition"], "attachment");
        }
        let (status, headers, bytes) = raw(&s, "HEAD", &path, w.token("ops")).await;
        assert_eq!((status, bytes.len()), (200, 0));
        assert_eq!(headers["etag"], format!("\"{digest}\"").as_str());

        // The reviewer's grant covers no subject naming the digest yet: the same 404 as for
        // bytes never stored, and the refusal recorded.
        let before = head_seq(&w).await;
        let (status, _, body) = raw(&s, "GET", &path, w.token("rev")).await;
        assert_eq!(status, 404);
        let refused: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let unknown = format!(
            "/v1/blobs/{}",
            verdict_core::digest::raw(b"never stored by anyone")
        );
        let (status, _, body) = raw(&s, "GET", &unknown, w.token("rev")).await;
        assert_eq!(status, 404);
        let missing: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(refused["code"], missing["code"]);
        assert_eq!(refused["title"], missing["title"]);
        let after = events_after(&w, before).await;
        assert_eq!(after.len(), 1, "{after:?}");
        assert_eq!(after[0].table, "denials");

        // Once a subject of its execution names the digest, the reviewer reads it.
        let r = s
            .send(
                "POST",
                "/v1/subjects",
                Some(w.token("coder")),
                Some(&subject(1, diff)),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let (status, _, bytes) = raw(&s, "GET", &path, w.token("rev")).await;
        assert_eq!(status, 200);
        assert_eq!(bytes, diff.as_bytes());

        // A principal with no grant at all still cannot.
        let token = w
            .engine
            .add_principal(&w.ops, "rev-2", verdict_core::contracts::Role::Verifier)
            .await
            .unwrap();
        let (status, _, _) = raw(&s, "GET", &path, &token).await;
        assert_eq!(status, 404);

        // A subject of another execution, under a mission, names other bytes. A mission grant
        // reads them; an execution grant on another execution, or on the mission's execution
        // but revoked, does not.
        let other = "diff --git a/m.rs b/m.rs\n+fn m() {}\n";
        let other_digest = verdict_core::digest::raw(other.as_bytes()).to_string();
        let other_path = format!("/v1/blobs/{other_digest}");
        let r = put("coder", other.as_bytes().to_vec(), other_path.clone()).await;
        assert_eq!(r.status, 201, "{r:?}");
        let mut doc = subject(1, other);
        doc["execution"]["id"] = json!("ex-m");
        doc["mission"] = json!("m-1");
        let scoped = |name: &'static str, kind: verdict_store::ScopeKind, id: &'static str| {
            let w = &w;
            async move {
                let token = w
                    .engine
                    .add_principal(&w.ops, name, verdict_core::contracts::Role::Verifier)
                    .await
                    .unwrap();
                w.engine
                    .grant(
                        &w.ops,
                        &format!("g-{name}"),
                        name,
                        kind,
                        id,
                        verdict_store::Access::Read,
                        &"2099-01-01T00:00:00Z".parse().unwrap(),
                    )
                    .await
                    .unwrap();
                token
            }
        };
        // Naming the mission needs the producer's write grant on it (schema 31).
        w.engine
            .grant(
                &w.ops,
                "g-coder-m",
                "coder",
                verdict_store::ScopeKind::Mission,
                "m-1",
                verdict_store::Access::Write,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&doc))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let by_mission = scoped("rev-m", verdict_store::ScopeKind::Mission, "m-1").await;
        let by_execution = scoped("rev-x", verdict_store::ScopeKind::Execution, "ex-m").await;
        let revoked = scoped("rev-old", verdict_store::ScopeKind::Execution, "ex-m").await;
        w.engine
            .revoke(&w.ops, "g-rev-old", "rotated")
            .await
            .unwrap();
        let other_mission = scoped("rev-o", verdict_store::ScopeKind::Mission, "m-2").await;
        for (token, readable) in [
            (by_mission.as_str(), true),
            (by_execution.as_str(), true),
            (revoked.as_str(), false),
            (other_mission.as_str(), false),
            (w.token("rev"), false),
        ] {
            let before = head_seq(&w).await;
            let (status, _, bytes) = raw(&s, "GET", &other_path, token).await;
            if readable {
                assert_eq!((status, bytes.as_slice()), (200, other.as_bytes()));
                assert_eq!(head_seq(&w).await, before, "a read wrote something");
            } else {
                assert_eq!(status, 404);
                let after = events_after(&w, before).await;
                assert_eq!(after.len(), 1, "{after:?}");
                assert_eq!(after[0].table, "denials");
            }
        }
        // The mission grant reads nothing its mission's subjects do not name.
        let (status, _, _) = raw(&s, "GET", &path, &by_mission).await;
        assert_eq!(status, 404);

        // Which of the subject's digests are stored (the objective's and the check's are not).
        let subject_digest = verdict_core::digest::digest(
            verdict_core::digest::DigestKind::Subject,
            &subject(1, diff),
        );
        let listed = w
            .engine
            .subject_blobs(&w.rev, subject_digest.as_str())
            .await
            .unwrap();
        let stored: Vec<(&str, bool)> =
            listed.iter().map(|b| (b.name.as_str(), b.stored)).collect();
        assert_eq!(
            stored,
            vec![("objective", false), ("diff", true), ("unit-tests", false)]
        );

        // A run's context: an unknown run is a 404 for an operator.
        let r = s
            .send(
                "GET",
                "/v1/runs/no-such-run/context",
                Some(w.token("ops")),
                None,
            )
            .await;
        assert_problem(&r, 404, "not_found");
    })
    .await;
}

/// A producer that learnt the digest of another execution's bytes names it in a subject of its
/// own, hoping to read them through that subject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_names_only_bytes_its_producer_may_read() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let until = "2099-01-01T00:00:00Z".parse().unwrap();
        let mut tokens = std::collections::BTreeMap::new();
        // mallory works ex-evil; coder-2 works ex-2 and may read coder's ex-1.
        for (name, grants) in [
            ("mallory", vec![("ex-evil", verdict_store::Access::Write)]),
            (
                "coder-2",
                vec![
                    ("ex-2", verdict_store::Access::Write),
                    (EXEC, verdict_store::Access::Read),
                ],
            ),
        ] {
            let token = w
                .engine
                .add_principal(&w.ops, name, verdict_core::contracts::Role::Producer)
                .await
                .unwrap();
            for (i, (execution, access)) in grants.into_iter().enumerate() {
                w.engine
                    .grant(
                        &w.ops,
                        &format!("g-{name}-{i}"),
                        name,
                        verdict_store::ScopeKind::Execution,
                        execution,
                        access,
                        &until,
                    )
                    .await
                    .unwrap();
            }
            tokens.insert(name, token);
        }
        let put_bytes = |token: String, bytes: &'static str| {
            let s = &s;
            async move {
                let path = format!("/v1/blobs/{}", verdict_core::digest::raw(bytes.as_bytes()));
                s.send_raw(
                    "PUT",
                    &path,
                    Some(&token),
                    Some((bytes.as_bytes().to_vec(), "text/plain")),
                )
                .await
            }
        };
        let subject_of = |execution: &str, producer: &str, bytes: &str| {
            let mut doc = subject(1, bytes);
            doc["execution"]["id"] = json!(execution);
            doc["producer"]["principal"] = json!(producer);
            doc
        };
        let get = |token: String, bytes: &'static str| {
            let s = &s;
            async move {
                let path = format!("/v1/blobs/{}", verdict_core::digest::raw(bytes.as_bytes()));
                raw(s, "GET", &path, &token).await
            }
        };

        // coder's bytes, named by coder's subject of ex-1.
        let secret = "diff --git a/keys.rs b/keys.rs\n+const KEY: u64 = 42;\n";
        let r = put_bytes(w.token("coder").to_owned(), secret).await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s
            .send(
                "POST",
                "/v1/subjects",
                Some(w.token("coder")),
                Some(&subject_of(EXEC, "coder", secret)),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");

        // mallory names the digest in a subject of its own execution: 403, only the denial
        // written, and the bytes stay unreadable to it.
        let before = head_seq(&w).await;
        let r = s
            .send(
                "POST",
                "/v1/subjects",
                Some(&tokens["mallory"]),
                Some(&subject_of("ex-evil", "mallory", secret)),
            )
            .await;
        assert_denied_once(&w, before, &r, "mallory", "permission_denied").await;
        assert!(
            r.body["detail"]
                .as_str()
                .unwrap()
                .contains(verdict_core::digest::raw(secret.as_bytes()).as_str()),
            "{r:?}"
        );
        let (status, _, _) = get(tokens["mallory"].clone(), secret).await;
        assert_eq!(status, 404);

        // Named before the bytes are stored, the digest is taken; once coder stores the bytes,
        // mallory's earlier subject does not vouch for them and reads nothing.
        let later = "diff --git a/later.rs b/later.rs\n+fn later() {}\n";
        let r = s
            .send(
                "POST",
                "/v1/subjects",
                Some(&tokens["mallory"]),
                Some(&subject_of("ex-evil", "mallory", later)),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = put_bytes(w.token("coder").to_owned(), later).await;
        assert_eq!(r.status, 201, "{r:?}");
        let (status, _, _) = get(tokens["mallory"].clone(), later).await;
        assert_eq!(status, 404);
        // ... while the reviewer, granted on ex-1 only, does not read it through ex-evil.
        let (status, _, _) = get(w.token("rev").to_owned(), later).await;
        assert_eq!(status, 404);

        // coder-2 may read ex-1, whose subject names the bytes: it may name them too, and its
        // own reader then reads them.
        let r = s
            .send(
                "POST",
                "/v1/subjects",
                Some(&tokens["coder-2"]),
                Some(&subject_of("ex-2", "coder-2", secret)),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let (status, _, bytes) = get(tokens["coder-2"].clone(), secret).await;
        assert_eq!((status, bytes.as_slice()), (200, secret.as_bytes()));

        // mallory holding the bytes itself puts them (recorded as a holder) and may then name
        // them: it proved it had them.
        let r = put_bytes(tokens["mallory"].clone(), secret).await;
        assert_eq!(r.status, 200, "{r:?}");
        let mut doc = subject_of("ex-evil", "mallory", secret);
        doc["execution"]["generation"] = json!(2);
        let r = s
            .send("POST", "/v1/subjects", Some(&tokens["mallory"]), Some(&doc))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let (status, _, _) = get(tokens["mallory"].clone(), secret).await;
        assert_eq!(status, 200);
        assert!(
            w.engine
                .store()
                .verify_audit(None)
                .await
                .unwrap()
                .is_intact()
        );
    })
    .await;
}
