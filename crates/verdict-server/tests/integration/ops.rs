//! What an operator of the server relies on, each body on SQLite and on PostgreSQL:
//! pagination that walks a list exactly once, request ids, metrics that move and that only an
//! operator reads, the rate limit on failed authentication per address and across addresses
//! (429 without a denial), the job queue's depth and lapsed leases on `/metrics`, and the
//! default body limit.
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
use verdict_server::limit::AuthLimit;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_walks_every_list_once_by_its_next_links() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let ops = w.token("ops");
        for i in 0..6 {
            let r = s
                .send(
                    "POST",
                    "/v1/principals",
                    Some(ops),
                    Some(&json!({"name": format!("p{i}"), "role": "runner"})),
                )
                .await;
            assert_eq!(r.status, 201, "{r:?}");
        }
        let all: Vec<String> = w
            .engine
            .list_principals(&w.ops)
            .await
            .unwrap()
            .iter()
            .map(|p| p.name.to_string())
            .collect();
        assert_eq!(all.len(), 11);

        let mut seen = Vec::new();
        let mut path = "/v1/principals?limit=4".to_owned();
        let mut pages = 0;
        loop {
            let r = s.send("GET", &path, Some(ops), None).await;
            assert_eq!(r.status, 200, "{r:?}");
            let items = r.body["items"].as_array().unwrap();
            assert!(items.len() <= 4);
            seen.extend(items.iter().map(|p| p["name"].as_str().unwrap().to_owned()));
            pages += 1;
            match r.body["next"].as_str() {
                Some(next) => {
                    let link = r.headers["link"].to_str().unwrap();
                    assert_eq!(link, format!("<{next}>; rel=\"next\""));
                    path = next.to_owned();
                }
                None => {
                    assert!(!r.headers.contains_key("link"));
                    break;
                }
            }
        }
        assert_eq!(pages, 3);
        assert_eq!(seen, all, "each principal exactly once, in order");

        // Grants keep their filter across pages.
        let r = s
            .send("GET", "/v1/grants?principal=coder&limit=1", Some(ops), None)
            .await;
        assert_eq!(r.body["items"].as_array().unwrap().len(), 1, "{r:?}");
        assert!(r.body["next"].is_null(), "{r:?}");
        let r = s.send("GET", "/v1/grants?limit=3", Some(ops), None).await;
        let next = r.body["next"].as_str().unwrap();
        assert!(next.starts_with("/v1/grants?limit=3&after="), "{next}");

        let before = head_seq(&w).await;
        for bad in [
            "limit=0",
            "limit=501",
            "limit=-1",
            "limit=x",
            "after=nobody",
            "limit=2&page=3",
        ] {
            let r = s
                .send("GET", &format!("/v1/principals?{bad}"), Some(ops), None)
                .await;
            assert_problem(&r, 400, "invalid_query");
        }
        assert_eq!(head_seq(&w).await, before);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_are_echoed_or_generated() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let r = s
            .send_headers(
                "GET",
                "/healthz",
                None,
                None,
                &[("x-request-id", "ci-build-42")],
            )
            .await;
        assert_eq!(r.headers["x-request-id"], "ci-build-42");
        // A refusal carries it too.
        let r = s
            .send_headers(
                "GET",
                "/v1/executions",
                Some("vdt_wrong"),
                None,
                &[("x-request-id", "ci-build-43")],
            )
            .await;
        assert_problem(&r, 401, "unauthenticated");
        assert_eq!(r.headers["x-request-id"], "ci-build-43");
        // None given, or one too long to log: one is generated, different each time.
        let a = s.send("GET", "/healthz", None, None).await;
        let long = "x".repeat(200);
        let b = s
            .send_headers("GET", "/healthz", None, None, &[("x-request-id", &long)])
            .await;
        let (a, b) = (
            a.headers["x-request-id"].to_str().unwrap().to_owned(),
            b.headers["x-request-id"].to_str().unwrap().to_owned(),
        );
        assert!(!a.is_empty() && !b.is_empty());
        assert_ne!(a, b);
        assert_ne!(b, long);
    })
    .await;
}

/// The value of the sample of `name` whose labels include every one of `labels`.
fn sample(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter(|l| labels.iter().all(|x| l.contains(x)))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_latency_and_decisions() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        let health = ["route=\"/healthz\"", "status=\"200\""];
        let r = s.send("GET", "/metrics", Some(w.token("ops")), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.content_type.starts_with("text/plain"), "{r:?}");
        // Nothing counted yet may be an empty exposition.
        let before = sample(
            r.body.as_str().unwrap_or(""),
            "verdict_http_requests_total",
            &health,
        );
        for _ in 0..3 {
            s.send("GET", "/healthz", None, None).await;
        }
        s.send("GET", "/v1/executions/ex-9", Some(w.token("ops")), None)
            .await;
        let r = s
            .send(
                "POST",
                "/v1/subjects",
                Some(w.token("coder")),
                Some(&subject(1, "d1")),
            )
            .await;
        assert_eq!(r.status, 201);
        let r = s
            .send(
                "POST",
                "/v1/executions/ex-1/gate-runs",
                Some(w.token("ops")),
                None,
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let outcome = r.body["decision"]["outcome"].as_str().unwrap().to_owned();
        let reason = r.body["decision"]["reasons"][0]["code"]
            .as_str()
            .unwrap()
            .to_owned();
        // The same evaluation again stores nothing, so counts no decision.
        s.send(
            "POST",
            "/v1/executions/ex-1/gate-runs",
            Some(w.token("ops")),
            None,
        )
        .await;

        let text = s
            .send("GET", "/metrics", Some(w.token("ops")), None)
            .await
            .body
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            sample(&text, "verdict_http_requests_total", &health),
            before + 3.0,
            "{text}"
        );
        // Routes are labelled by template, never by the id in the path.
        assert_eq!(
            sample(
                &text,
                "verdict_http_requests_total",
                &["route=\"/v1/executions/{id}\"", "status=\"404\""]
            ),
            1.0,
            "{text}"
        );
        assert!(!text.contains("ex-9"), "{text}");
        assert_eq!(
            sample(
                &text,
                "verdict_http_problems_total",
                &["code=\"not_found\""]
            ),
            1.0,
            "{text}"
        );
        assert!(
            sample(
                &text,
                "verdict_http_request_duration_seconds_count",
                &["route=\"/healthz\""]
            ) >= 3.0,
            "{text}"
        );
        assert!(
            text.contains("verdict_http_request_duration_seconds_bucket"),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "verdict_gate_decisions_total",
                &[&format!("outcome=\"{outcome}\"")]
            ),
            1.0,
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "verdict_gate_decision_reasons_total",
                &[&format!("reason=\"{reason}\"")]
            ),
            1.0,
            "{text}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_the_queue_depth_and_lapsed_leases_from_the_store() {
    on_both(|store| async move {
        let w = world(store).await;
        let mut policy = policy();
        policy["revision"] = json!(2);
        policy["required_verifiers"] = json!([]);
        w.engine.set_policy(&w.ops, &policy).await.unwrap();
        let s = serve(AppState::new(w.engine.clone())).await;
        let scrape = || async {
            s.send("GET", "/metrics", Some(w.token("ops")), None)
                .await
                .body
                .as_str()
                .unwrap()
                .to_owned()
        };
        let jobs = |text: &str, kind: &str, state: &str| {
            sample(
                text,
                "verdict_jobs",
                &[&format!("kind=\"{kind}\""), &format!("state=\"{state}\"")],
            )
        };
        let text = scrape().await;
        assert_eq!(sample(&text, "verdict_queue_read_ok", &[]), 1.0, "{text}");
        assert_eq!(jobs(&text, "checks", "ready"), 0.0, "{text}");

        // A request's jobs wait: its checks and its gate.
        let coder = w.engine.authenticate(w.token("coder")).await.unwrap();
        w.engine
            .put_subject(&coder, &subject(1, "d"))
            .await
            .unwrap();
        let request = w
            .engine
            .create_request(&coder, EXEC, &json!({}))
            .await
            .unwrap();
        w.engine
            .enqueue_request_jobs(&coder, &request, None)
            .await
            .unwrap();
        let text = scrape().await;
        assert_eq!(jobs(&text, "checks", "ready"), 1.0, "{text}");
        assert_eq!(jobs(&text, "gate", "ready"), 1.0, "{text}");
        assert_eq!(jobs(&text, "verify", "ready"), 0.0, "{text}");
        assert_eq!(jobs(&text, "checks", "running"), 0.0, "{text}");

        // A runner claims the checks job for a millisecond and never comes back: running, and
        // once the store's clock passes the lease, lapsed.
        let ci = w.engine.authenticate(w.token("ci")).await.unwrap();
        let claimed = w
            .engine
            .store()
            .queue()
            .claim_job(
                &ci.actor(),
                verdict_store::JobKind::Checks,
                "gone",
                std::time::Duration::from_millis(1),
            )
            .await
            .unwrap();
        assert!(claimed.is_some());
        let mut text = scrape().await;
        for _ in 0..200 {
            if sample(&text, "verdict_job_leases_lapsed", &["kind=\"checks\""]) == 1.0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            text = scrape().await;
        }
        assert_eq!(jobs(&text, "checks", "ready"), 0.0, "{text}");
        assert_eq!(jobs(&text, "checks", "running"), 1.0, "{text}");
        assert_eq!(
            sample(&text, "verdict_job_leases_lapsed", &["kind=\"checks\""]),
            1.0,
            "{text}"
        );
        assert_eq!(
            sample(&text, "verdict_job_leases_lapsed", &["kind=\"gate\""]),
            0.0,
            "{text}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_authentication_past_the_limit_is_429_and_writes_no_denial() {
    on_both(|store| async move {
        let w = world(store).await;
        let state = AppState::new(w.engine.clone()).with_auth_limit(AuthLimit {
            burst: 3,
            per_minute: 1,
            ..AuthLimit::default()
        });
        let s = serve(state).await;
        let before = w.denials().await.len();
        for i in 0..3 {
            let r = s
                .send(
                    "GET",
                    "/v1/executions",
                    Some(&format!("vdt_guess-{i}")),
                    None,
                )
                .await;
            assert_problem(&r, 401, "unauthenticated");
        }
        assert_eq!(w.denials().await.len(), before + 3);
        let seq = head_seq(&w).await;
        // Past the burst: refused before the engine, nothing written, told when to come back.
        for token in [Some("vdt_guess-4"), None] {
            let r = s
                .send("POST", "/v1/subjects", token, Some(&subject(1, "d1")))
                .await;
            assert_problem(&r, 429, "rate_limited");
            assert_eq!(r.body["retryable"], true);
            let wait: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
            assert!((1..=60).contains(&wait), "{wait}");
        }
        assert_eq!(head_seq(&w).await, seq, "a limited request wrote");
        assert_eq!(w.denials().await.len(), before + 3);
        // A valid token from the same address still works.
        let r = s
            .send("GET", "/v1/executions", Some(w.token("ops")), None)
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        // Routes that need no token are not limited.
        let r = s.send("GET", "/healthz", None, None).await;
        assert_eq!(r.status, 200, "{r:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_from_many_addresses_share_one_limit_and_a_valid_token_still_works() {
    on_both(|store| async move {
        let w = world(store).await;
        // Each address may fail three times; all of them together, five.
        let state = AppState::new(w.engine.clone()).with_auth_limit(AuthLimit {
            burst: 3,
            per_minute: 1,
            server_burst: 5,
            server_per_minute: 1,
        });
        let s = serve(state).await;
        let from = |i: u8| std::net::IpAddr::from([127, 0, 0, i]);
        let denials = w.denials().await.len();
        // Five addresses fail once each, none near its own limit: each refusal is recorded.
        for i in 10..15 {
            let r = s
                .send_from(from(i), "GET", "/v1/executions", Some("vdt_guess"))
                .await;
            assert_problem(&r, 401, "unauthenticated");
        }
        assert_eq!(w.denials().await.len(), denials + 5);
        let seq = head_seq(&w).await;
        // The server's allowance is spent: every further address, on every route that takes
        // a token, is turned away before the engine, and nothing is written.
        for i in 15..45 {
            let path = if i % 2 == 0 {
                "/v1/executions"
            } else {
                "/metrics"
            };
            let token = if i % 3 == 0 { None } else { Some("vdt_guess") };
            let r = s.send_from(from(i), "GET", path, token).await;
            assert_problem(&r, 429, "rate_limited");
            assert_eq!(r.body["retryable"], true);
            assert!(
                r.body["detail"].as_str().unwrap().contains("every address"),
                "{r:?}"
            );
            let wait: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
            assert!((1..=60).contains(&wait), "{wait}");
        }
        // An address that failed before is refused too.
        let r = s
            .send_from(from(10), "GET", "/v1/executions", Some("vdt_guess"))
            .await;
        assert_problem(&r, 429, "rate_limited");
        assert_eq!(head_seq(&w).await, seq, "a limited request wrote");
        assert_eq!(w.denials().await.len(), denials + 5);
        // A held token still works during the flood, from a flooding address or a new one.
        for i in [10, 16, 200] {
            let r = s
                .send_from(from(i), "GET", "/v1/executions", Some(w.token("ops")))
                .await;
            assert_eq!(r.status, 200, "{r:?}");
            let r = s
                .send_from(from(i), "GET", "/metrics", Some(w.token("ops")))
                .await;
            assert_eq!(r.status, 200, "{r:?}");
        }
        let r = s
            .send_from(from(202), "GET", "/v1/executions", Some(w.token("coder")))
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        // Routes that take no token stay open.
        for path in ["/healthz", "/readyz"] {
            let r = s.send_from(from(201), "GET", path, None).await;
            assert_eq!(r.status, 200, "{path}: {r:?}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_an_operators_read() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        // No token, or one nobody holds: 401, recorded as any failed authentication is.
        let denials = w.denials().await.len();
        for token in [None, Some("vdt_guess")] {
            let r = s.send("GET", "/metrics", token, None).await;
            assert_problem(&r, 401, "unauthenticated");
            assert_eq!(r.headers["www-authenticate"], "Bearer", "{r:?}");
            assert!(!r.body.to_string().contains("verdict_http"), "{r:?}");
        }
        assert_eq!(w.denials().await.len(), denials + 2);
        // Any principal but an operator: 403 and its denial, and nothing else written.
        for who in ["coder", "ci", "rev", "alice"] {
            let before = head_seq(&w).await;
            let r = s.send("GET", "/metrics", Some(w.token(who)), None).await;
            assert_denied_once(&w, before, &r, who, "permission_denied").await;
            assert!(
                r.body["detail"].as_str().unwrap().contains("metrics"),
                "{r:?}"
            );
        }
        // An operator reads the exposition, which counted the refusals.
        let before = head_seq(&w).await;
        let r = s.send("GET", "/metrics", Some(w.token("ops")), None).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.content_type.starts_with("text/plain"), "{r:?}");
        let text = r.body.as_str().unwrap();
        assert_eq!(
            sample(
                text,
                "verdict_http_requests_total",
                &["route=\"/metrics\"", "status=\"403\""]
            ),
            4.0,
            "{text}"
        );
        assert_eq!(
            sample(
                text,
                "verdict_http_problems_total",
                &["code=\"unauthenticated\""]
            ),
            2.0,
            "{text}"
        );
        assert_eq!(sample(text, "verdict_queue_read_ok", &[]), 1.0, "{text}");
        assert_eq!(head_seq(&w).await, before, "a scrape wrote");
        // Health and readiness need no token.
        for path in ["/healthz", "/readyz"] {
            let r = s.send("GET", path, None, None).await;
            assert_eq!(r.status, 200, "{path}: {r:?}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_body_limit_is_the_store_s_4_mib() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(AppState::new(w.engine.clone())).await;
        assert_eq!(verdict_server::DEFAULT_BODY_LIMIT, 4 << 20);
        let big = format!("{{\"reason\": \"{}\"}}", "x".repeat(4 << 20));
        let before = head_seq(&w).await;
        let r = s
            .send_raw(
                "POST",
                "/v1/executions/ex-1/cancel",
                Some(w.token("ops")),
                Some((big.into_bytes(), "application/json")),
            )
            .await;
        assert_problem(&r, 413, "payload_too_large");
        assert_eq!(head_seq(&w).await, before);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_the_request_in_flight_finish_then_stops() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    on_both(|store| async move {
        let w = world(store).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(verdict_server::serve(
            listener,
            AppState::new(w.engine.clone()),
            async move {
                let _ = stopped.await;
            },
        ));
        // A request whose body is still arriving when the server is told to stop.
        let body = br#"{"reason": "superseded"}"#;
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /v1/executions/ex-1/cancel HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            w.token("ops"),
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(&body[..5]).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        stop.send(()).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!server.is_finished(), "the server stopped with a request in flight");
        conn.write_all(&body[5..]).await.unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).await.unwrap();
        // The engine answered it: no execution ex-1 is stored.
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        assert!(answer.contains("\"not_found\""), "{answer}");
        tokio::time::timeout(std::time::Duration::from_secs(10), server)
            .await
            .expect("the server did not stop after its last request")
            .unwrap()
            .unwrap();
        // Stopped: no new connection is served.
        let refused = tokio::net::TcpStream::connect(addr).await;
        assert!(refused.is_err(), "still accepting after shutdown");
    })
    .await;
}
