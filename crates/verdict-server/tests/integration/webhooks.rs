//! Webhooks over real HTTP, each body on SQLite and on PostgreSQL: a loopback receiver gets
//! each matching event signed (the HMAC checked here, independently of the server's code), a
//! receiver that fails twice gets it on the third attempt and never again, a delivery that
//! fails every attempt is recorded, and only an operator registers a webhook.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use axum::http::{HeaderMap, StatusCode};
use common::*;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use verdict_server::AppState;
use verdict_server::webhooks::{Retry, WebhookKey, Webhooks};
use verdict_store::Table;

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Delivery {
    headers: HeaderMap,
    body: Vec<u8>,
    answered: u16,
}

/// A loopback receiver that answers 500 to its first `fail` requests, then 204.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<Delivery>>>,
}

async fn receiver(fail: usize) -> Receiver {
    let got: Arc<Mutex<Vec<Delivery>>> = Arc::default();
    let seen = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                let mut seen = seen.lock().unwrap();
                let answered = if seen.len() < fail {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::NO_CONTENT
                };
                seen.push(Delivery {
                    headers,
                    body: body.to_vec(),
                    answered: answered.as_u16(),
                });
                answered
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Receiver {
        url: format!("http://{addr}/hook"),
        got,
    }
}

impl Receiver {
    fn deliveries(&self) -> Vec<Delivery> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until `n` requests arrived.
    async fn wait_for(&self, n: usize) -> Vec<Delivery> {
        for _ in 0..400 {
            let got = self.deliveries();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{n} deliveries never arrived: {:?}", self.deliveries());
    }
}

/// Whether `sig` is `sha256=` and the HMAC-SHA256 under `secret` of `<timestamp>.<body>`,
/// computed here with the hmac crate directly.
fn verifies(secret: &str, d: &Delivery) -> bool {
    let ts = d.headers["verdict-timestamp"].to_str().unwrap();
    let sig = d.headers["verdict-signature"].to_str().unwrap();
    let Some(hex) = sig.strip_prefix("sha256=") else {
        return false;
    };
    let Ok(bytes) = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("zz"), 16))
        .collect::<Result<Vec<u8>, _>>()
    else {
        return false;
    };
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(ts.as_bytes());
    mac.update(b".");
    mac.update(&d.body);
    mac.verify_slice(&bytes).is_ok()
}

fn state(w: &World, attempts: u32) -> AppState {
    AppState {
        webhooks: Some(Arc::new(Webhooks {
            key: WebhookKey::new(vec![42; 32]).unwrap(),
            retry: Retry {
                attempts,
                base: Duration::from_millis(20),
                max: Duration::from_millis(100),
                timeout: Duration::from_secs(5),
                poll: Duration::from_millis(50),
            },
            lease: Duration::from_secs(2),
        })),
        ..AppState::new(w.engine.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_gets_each_event_signed_and_a_failing_one_on_its_third_try_only() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(state(&w, 3)).await;
        let ops = w.token("ops");
        let flaky = receiver(2).await;
        let r = s
            .send(
                "POST",
                "/v1/webhooks",
                Some(ops),
                Some(&json!({
                    "id": "wh-1", "url": flaky.url,
                    "scope": {"kind": "execution", "id": EXEC},
                    "event_types": ["gate_decision"],
                })),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let secret = r.body["secret"].as_str().unwrap().to_owned();
        assert!(secret.starts_with("whsec_"), "{r:?}");
        // The secret is shown, never stored: only its digest is.
        assert_eq!(
            r.body["webhook"]["secret_sha256"],
            verdict_core::digest::raw(secret.as_bytes()).as_str()
        );
        let stored = w
            .engine
            .store()
            .rows(Table::VerificationRequests, 0, 1000)
            .await
            .unwrap();
        assert!(stored.iter().all(|row| !row.body.contains(&secret)));
        let r = s
            .send(
                "POST",
                "/v1/webhooks",
                Some(ops),
                Some(&json!({"id": "wh-1", "url": flaky.url, "scope": {"kind": "all"}})),
            )
            .await;
        assert_problem(&r, 409, "conflict");

        // A receiver that never takes anything: three attempts per event, then a record.
        let down = receiver(usize::MAX).await;
        let r = s
            .send(
                "POST",
                "/v1/webhooks",
                Some(ops),
                Some(&json!({"id": "wh-down", "url": down.url, "scope": {"kind": "all"}, "event_types": ["gate_decision"]})),
            )
            .await;
 assert_eq!(r.status, 201, "{r:?}");
        let down_secret = r.body["secret"].as_str().unwrap().to_owned();
        assert_ne!(down_secret, secret);

        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&subject(1, "d1")))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s
            .send("POST", "/v1/executions/ex-1/gate-runs", Some(ops), None)
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let decision = r.body["decision"].clone();

        let got = flaky.wait_for(3).await;
        let answers: Vec<u16> = got.iter().map(|d| d.answered).collect();
        assert_eq!(answers, [500, 500, 204]);
        let seq = events_after(&w, 0)
            .await
            .iter()
            .rev()
            .find(|e| e.table == "gate_decisions")
            .unwrap()
            .seq;
        for d in &got {
            assert_eq!(d.headers["verdict-event-id"].to_str().unwrap(), seq.to_string());
            assert_eq!(d.headers["content-type"].to_str().unwrap(), "application/json");
            assert!(verifies(&secret, d), "{d:?}");
            // A signature under any other secret does not verify.
            assert!(!verifies("whsec_wrong", d));
            let body: Value = serde_json::from_slice(&d.body).unwrap();
            assert_eq!(body["seq"], seq);
            assert_eq!(body["type"], "gate_decision");
            assert_eq!(body["outcome"], decision["outcome"]);
        }
        // A body changed in transit no longer verifies.
        let mut tampered = got[2].clone();
        tampered.body.push(b' ');
        assert!(!verifies(&secret, &tampered));

        // The webhook that never answers 2xx: three attempts, then its failure is recorded.
        let tries = down.wait_for(3).await;
        assert!(tries.iter().all(|d| verifies(&down_secret, d)));
        assert!(tries.iter().all(|d| !verifies(&secret, d)));
        let mut failure = None;
        for _ in 0..200 {
            failure = w
                .engine
                .store()
                .rows(Table::VerificationRequests, 0, 1000)
                .await
                .unwrap()
                .into_iter()
                .map(|row| row.value().unwrap())
                .find(|v| v["schema"] == "verdict.webhook-failure/v1");
            if failure.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let failure = failure.expect("no failure recorded");
        assert_eq!(failure["webhook"], "wh-down");
        assert_eq!(failure["event"], seq);
        assert_eq!(failure["attempts"], 3);

        // Other events (the subject's move) are outside both webhooks' types; nothing is sent
        // again once taken.
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&subject(2, "d2")))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(flaky.deliveries().len(), 3);
        assert_eq!(down.deliveries().len(), 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_operator_registers_a_webhook_and_only_to_https_or_loopback() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(state(&w, 1)).await;
        let body =
            json!({"id": "wh-x", "url": "https://hooks.example.com/x", "scope": {"kind": "all"}});
        for who in ["coder", "ci", "rev", "alice"] {
            let before = head_seq(&w).await;
            let r = s
                .send("POST", "/v1/webhooks", Some(w.token(who)), Some(&body))
                .await;
            assert_denied_once(&w, before, &r, who, "permission_denied").await;
        }
        let before = head_seq(&w).await;
        for (field, value) in [
            ("url", json!("http://hooks.example.com/x")),
            ("url", json!("ftp://127.0.0.1/x")),
            ("event_types", json!(["everything"])),
        ] {
            let mut bad = body.clone();
            bad[field] = value;
            let r = s
                .send("POST", "/v1/webhooks", Some(w.token("ops")), Some(&bad))
                .await;
            assert_problem(&r, 422, "invalid_input");
        }
        let mut bad = body.clone();
        bad["scope"] = json!({"kind": "everyone"});
        let r = s
            .send("POST", "/v1/webhooks", Some(w.token("ops")), Some(&bad))
            .await;
        assert_eq!(r.status / 100, 4, "{r:?}");
        assert_eq!(head_seq(&w).await, before, "a refused registration wrote");

        // A server without a webhook key registers nothing, and says so.
        let plain = serve(AppState::new(w.engine.clone())).await;
        let r = plain
            .send("POST", "/v1/webhooks", Some(w.token("ops")), Some(&body))
            .await;
        assert_problem(&r, 409, "webhooks_disabled");
        assert_eq!(head_seq(&w).await, before);
        let r = s
            .send("POST", "/v1/webhooks", Some(w.token("ops")), Some(&body))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let secret = r.body["secret"].as_str().unwrap().to_owned();

        // Listing is operators' only too, and never shows the secret.
        let r = s
            .send("GET", "/v1/webhooks", Some(w.token("ops")), None)
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["items"][0]["id"], "wh-x");
        assert!(!r.body.to_string().contains(&secret));
        let before = head_seq(&w).await;
        let r = s
            .send("GET", "/v1/webhooks", Some(w.token("rev")), None)
            .await;
        assert_denied_once(&w, before, &r, "rev", "permission_denied").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_not_followed_and_counts_as_a_failed_attempt() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(state(&w, 2)).await;
        let target = receiver(0).await;
        let hits: Arc<Mutex<usize>> = Arc::default();
        let counted = hits.clone();
        let location = target.url.clone();
        let app = axum::Router::new().route(
            "/moved",
            axum::routing::post(move || {
                let counted = counted.clone();
                let location = location.clone();
                async move {
                    *counted.lock().unwrap() += 1;
                    (
                        StatusCode::TEMPORARY_REDIRECT,
                        [(axum::http::header::LOCATION, location)],
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

        let r = s
            .send(
                "POST",
                "/v1/webhooks",
                Some(w.token("ops")),
                Some(&json!({"id": "wh-moved", "url": format!("http://{addr}/moved"), "scope": {"kind": "all"}, "event_types": ["subject_moved"]})),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s
            .send("POST", "/v1/subjects", Some(w.token("coder")), Some(&subject(1, "d1")))
            .await;
        assert_eq!(r.status, 201, "{r:?}");

        let mut failure = None;
        for _ in 0..200 {
            failure = w
                .engine
                .store()
                .rows(Table::VerificationRequests, 0, 1000)
                .await
                .unwrap()
                .into_iter()
                .map(|row| row.value().unwrap())
                .find(|v| v["schema"] == "verdict.webhook-failure/v1");
            if failure.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let failure = failure.expect("no failure recorded");
        assert_eq!(failure["webhook"], "wh-moved");
        assert_eq!(failure["attempts"], 2);
        assert!(failure["error"].as_str().unwrap().contains("307"), "{failure}");
        assert_eq!(*hits.lock().unwrap(), 2);
        assert!(target.deliveries().is_empty(), "the redirect was followed");
    })
    .await;
}

/// The delivery records stored so far.
async fn delivered_records(w: &World) -> usize {
    w.engine
        .store()
        .rows(Table::VerificationRequests, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|row| row.value().unwrap()["schema"] == "verdict.webhook-delivered/v1")
        .count()
}

/// Waits until `n` deliveries are recorded in the store.
async fn wait_recorded(w: &World, n: usize) {
    for _ in 0..400 {
        if delivered_records(w).await >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{n} deliveries were never recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_resumes_after_the_last_delivered_event_without_gap_or_repeat() {
    on_both(|store| async move {
        let w = world(store).await;
        let hook = receiver(0).await;
        let coder = w.engine.authenticate(w.token("coder")).await.unwrap();
        {
            let s = serve(state(&w, 2)).await;
            let r = s
                .send(
                    "POST",
                    "/v1/webhooks",
                    Some(w.token("ops")),
                    Some(
                        &json!({"id": "wh-r", "url": hook.url, "scope": {"kind": "all"},
                                 "event_types": ["subject_moved"]}),
                    ),
                )
                .await;
            assert_eq!(r.status, 201, "{r:?}");
            for g in 1..=2 {
                w.engine
                    .put_subject(&coder, &subject(g, &format!("d{g}")))
                    .await
                    .unwrap();
            }
            hook.wait_for(2).await;
            wait_recorded(&w, 2).await;
        }
        // The first server is stopped; two more events happen while no server runs.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for g in 3..=4 {
            w.engine
                .put_subject(&coder, &subject(g, &format!("d{g}")))
                .await
                .unwrap();
        }
        assert_eq!(hook.deliveries().len(), 2, "delivered while stopped");
        let _s = serve(state(&w, 2)).await;
        let got = hook.wait_for(4).await;
        wait_recorded(&w, 4).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        let ids: Vec<u64> = hook
            .deliveries()
            .iter()
            .map(|d| {
                d.headers["verdict-event-id"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert_eq!(got.len(), 4);
        // Each subject move exactly once, in order: nothing sent again, nothing skipped.
        let bodies: Vec<Value> = hook
            .deliveries()
            .iter()
            .map(|d| serde_json::from_slice(&d.body).unwrap())
            .collect();
        let generations: Vec<u64> = bodies
            .iter()
            .map(|b| b["generation"].as_u64().unwrap())
            .collect();
        assert_eq!(generations, [1, 2, 3, 4], "{bodies:?}");
        assert!(ids.windows(2).all(|p| p[0] < p[1]), "{ids:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_operator_removes_a_webhook_and_nothing_is_delivered_after() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(state(&w, 1)).await;
        let hook = receiver(0).await;
        let ops = w.token("ops");
        let r = s
            .send(
                "POST",
                "/v1/webhooks",
                Some(ops),
                Some(
                    &json!({"id": "wh-gone", "url": hook.url, "scope": {"kind": "all"},
                             "event_types": ["subject_moved"]}),
                ),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let coder = w.engine.authenticate(w.token("coder")).await.unwrap();
        w.engine
            .put_subject(&coder, &subject(1, "d1"))
            .await
            .unwrap();
        hook.wait_for(1).await;
        // Its delivery record is written once the receiver answered.
        wait_recorded(&w, 1).await;

        for who in ["coder", "ci", "rev", "alice"] {
            let before = head_seq(&w).await;
            let r = s
                .send("DELETE", "/v1/webhooks/wh-gone", Some(w.token(who)), None)
                .await;
            assert_denied_once(&w, before, &r, who, "permission_denied").await;
        }
        let before = head_seq(&w).await;
        let r = s
            .send("DELETE", "/v1/webhooks/wh-none", Some(ops), None)
            .await;
        assert_problem(&r, 404, "not_found");
        assert_eq!(head_seq(&w).await, before, "a refused removal wrote");
        let r = s
            .send("DELETE", "/v1/webhooks/wh-gone", Some(ops), None)
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["webhook"], "wh-gone");
        assert_eq!(r.body["removed_by"], "ops");
        // The removal is in the audit chain, as one more record.
        assert_eq!(head_seq(&w).await, before + 1);
        let r = s
            .send("DELETE", "/v1/webhooks/wh-gone", Some(ops), None)
            .await;
        assert_problem(&r, 409, "conflict");
        let r = s.send("GET", "/v1/webhooks", Some(ops), None).await;
        assert_eq!(r.body["items"], json!([]), "{r:?}");

        // The delivery loop reads the removal within its poll interval; nothing after it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        w.engine
            .put_subject(&coder, &subject(2, "d2"))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(hook.deliveries().len(), 1, "{:?}", hook.deliveries());
    })
    .await;
}

/// The event ids a receiver got, in arrival order.
fn event_ids(hook: &Receiver) -> Vec<u64> {
    hook.deliveries()
        .iter()
        .map(|d| {
            d.headers["verdict-event-id"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_store_deliver_each_event_once_and_the_second_takes_over() {
    on_both_twice(|one, two| async move {
        let w = world(one).await;
        let other = verdict_engine::Engine::new(two, "merge");
        let hook = receiver(0).await;
        let coder = w.engine.authenticate(w.token("coder")).await.unwrap();
        // The first server alone, so it is the one that takes the delivery lease.
        let first = serve(state(&w, 2)).await;
        let r = first
            .send(
                "POST",
                "/v1/webhooks",
                Some(w.token("ops")),
                Some(
                    &json!({"id": "wh-two", "url": hook.url, "scope": {"kind": "all"},
                             "event_types": ["subject_moved"]}),
                ),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        w.engine
            .put_subject(&coder, &subject(1, "d1"))
            .await
            .unwrap();
        hook.wait_for(1).await;
        // Now a second server over its own handle, with the same key: it does not deliver
        // while the first holds the lease.
        let second_state = AppState {
            engine: other.clone(),
            ..state(&w, 2)
        };
        let second = serve(second_state).await;
        for g in 2..=3 {
            w.engine
                .put_subject(&coder, &subject(g, &format!("d{g}")))
                .await
                .unwrap();
        }
        hook.wait_for(3).await;
        wait_recorded(&w, 3).await;
        // Long enough for each server to have renewed or asked several times.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let ids = event_ids(&hook);
        assert_eq!(ids.len(), 3, "an event was delivered twice: {ids:?}");
        assert!(ids.windows(2).all(|p| p[0] < p[1]), "{ids:?}");

        // The first server stops; the second takes over once the lease lapsed, and resumes
        // after the last event delivered: nothing again, nothing skipped.
        drop(first);
        tokio::time::sleep(Duration::from_millis(300)).await;
        for g in 4..=5 {
            other
                .put_subject(&coder, &subject(g, &format!("d{g}")))
                .await
                .unwrap();
        }
        hook.wait_for(5).await;
        wait_recorded(&w, 5).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let ids = event_ids(&hook);
        assert_eq!(ids.len(), 5, "an event was delivered twice: {ids:?}");
        assert!(ids.windows(2).all(|p| p[0] < p[1]), "{ids:?}");
        let generations: Vec<u64> = hook
            .deliveries()
            .iter()
            .map(|d| {
                let body: Value = serde_json::from_slice(&d.body).unwrap();
                body["generation"].as_u64().unwrap()
            })
            .collect();
        assert_eq!(generations, [1, 2, 3, 4, 5]);
        drop(second);
    })
    .await;
}
