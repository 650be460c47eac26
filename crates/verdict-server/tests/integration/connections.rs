//! What a connection must do to be kept, over real TCP on loopback, each body on SQLite and on
//! PostgreSQL: one that sends nothing, or drips its headers, is closed after the header
//! timeout; a body that does not arrive whole in time is refused and its connection closed,
//! writing nothing; connections over the cap wait until one closes; one address holds at most
//! its share while another is served; a client with a token is
//! served while idle connections hold every place; an event stream is not cut by the header
//! timeout; stopping the server closes idle connections. The timeouts are set small and every
//! bound asserted is several times them, so a slow machine does not fail a test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common::*;
use crate::events::{Stream, fast};
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use verdict_server::AppState;
use verdict_server::listen::ConnLimits;

/// The bound within which the server must have closed a connection: many times any timeout
/// set below.
const CLOSED_WITHIN: Duration = Duration::from_secs(15);

fn limited(state: AppState, max_connections: usize, header: Duration, body: Duration) -> AppState {
    AppState {
        connections: ConnLimits {
            max_connections,
            // No address is capped apart from the whole: every client here is 127.0.0.1.
            max_per_address: max_connections,
            header_timeout: header,
            body_timeout: body,
        },
        ..state
    }
}

async fn connect(s: &Server) -> TcpStream {
    TcpStream::connect(s.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// What the server sent until it closed the connection; panics if it is still open after
/// `within`. A reset counts as closed.
async fn read_until_closed(tcp: &mut TcpStream, within: Duration) -> String {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    loop {
        let mut buf = [0u8; 4096];
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Err(_) => panic!(
                "the server kept the connection open past {within:?}; it sent {:?}",
                String::from_utf8_lossy(&got)
            ),
            Ok(Ok(0) | Err(_)) => return String::from_utf8_lossy(&got).into_owned(),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Writes `first`, then `drip` every 200 ms until the server stops taking it.
fn drip(
    mut w: tokio::net::tcp::OwnedWriteHalf,
    first: String,
    drip: &'static [u8],
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if w.write_all(first.as_bytes()).await.is_err() {
            return;
        }
        for _ in 0..300 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if w.write_all(drip).await.is_err() {
                return;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_sends_nothing_or_drips_its_headers_is_closed_after_the_header_timeout() {
    on_both(|store| async move {
        let w = world(store).await;
        let state = limited(
            AppState::new(w.engine.clone()),
            16,
            Duration::from_secs(1),
            Duration::from_secs(60),
        );
        let s = serve(state).await;

        // Nothing at all.
        let mut idle = connect(&s).await;
        let sent = read_until_closed(&mut idle, CLOSED_WITHIN).await;
        assert!(!sent.contains("200 OK"), "{sent}");

        // A header line every 200 ms: each arrives well within the timeout, the headers never
        // end, and the timeout counts from the first byte, not the last.
        let (mut read, write) = connect(&s).await.into_split();
        let writer = drip(
            write,
            "GET /healthz HTTP/1.1\r\nHost: verdict\r\n".into(),
            b"X-Drip: 1\r\n",
        );
        let deadline = Instant::now() + CLOSED_WITHIN;
        let mut got = Vec::new();
        loop {
            let mut buf = [0u8; 1024];
            match tokio::time::timeout_at(deadline, read.read(&mut buf)).await {
                Err(_) => panic!("a connection dripping its headers was kept open"),
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            }
        }
        assert!(!String::from_utf8_lossy(&got).contains("200 OK"), "{got:?}");
        writer.abort();

        // A connection that keeps its side of the bargain is served, and so is the next
        // client: the closed connections held nothing back.
        let r = s
            .send("GET", "/v1/principals", Some(w.token("ops")), None)
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        // An idle keep-alive connection is closed too, after its last answer.
        idle = connect(&s).await;
        idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: verdict\r\n\r\n")
            .await
            .unwrap();
        let sent = read_until_closed(&mut idle, CLOSED_WITHIN).await;
        assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_arrive_in_time_is_refused_and_writes_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        let coder = w.engine.authenticate(w.token("coder")).await.unwrap();
        w.engine
            .put_subject(&coder, &subject(1, "d"))
            .await
            .unwrap();
        let state = limited(
            AppState::new(w.engine.clone()),
            16,
            Duration::from_secs(60),
            Duration::from_secs(1),
        );
        let s = serve(state).await;
        let seq = head_seq(&w).await;

        // A byte of a 200-byte body every 200 ms: never a pause near the timeout, yet the body
        // is nowhere near whole when it passes.
        let (mut read, write) = connect(&s).await.into_split();
        let head = format!(
            "POST /v1/executions/{EXEC}/cancel HTTP/1.1\r\nHost: verdict\r\n\
             Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
             Content-Length: 200\r\n\r\n{{\"reason\":",
            w.token("ops")
        );
        let writer = drip(write, head, b" ");
        let deadline = Instant::now() + CLOSED_WITHIN;
        let mut got = Vec::new();
        loop {
            let mut buf = [0u8; 4096];
            match tokio::time::timeout_at(deadline, read.read(&mut buf)).await {
                Err(_) => panic!(
                    "a body dripped past the timeout kept its connection: {:?}",
                    String::from_utf8_lossy(&got)
                ),
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            }
        }
        writer.abort();
        let answer = String::from_utf8_lossy(&got);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
        assert!(answer.contains("\"retryable\":true"), "{answer}");
        assert_eq!(
            head_seq(&w).await,
            seq,
            "a request cut short wrote something"
        );

        // The same request sent whole is served.
        let r = s
            .send(
                "POST",
                &format!("/v1/executions/{EXEC}/cancel"),
                Some(w.token("ops")),
                Some(&json!({"reason": "sent in time"})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
    })
    .await;
}

/// A raw request for `/healthz` on a connection of its own, answered and closed.
const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: verdict\r\nConnection: close\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_wait_until_one_closes() {
    on_both(|store| async move {
        let w = world(store).await;
        // A header timeout far beyond the test: only a connection closing frees a place.
        let state = limited(
            AppState::new(w.engine.clone()),
            2,
            Duration::from_secs(600),
            Duration::from_secs(60),
        );
        let s = serve(state).await;
        let first = connect(&s).await;
        let mut second = connect(&s).await;

        // The kernel completes the third connection's handshake, but the server does not
        // accept it while two are open: its request is not answered.
        let mut third = connect(&s).await;
        third.write_all(HEALTHZ).await.unwrap();
        let mut buf = [0u8; 64];
        let early = tokio::time::timeout(Duration::from_secs(2), third.read(&mut buf)).await;
        assert!(
            early.is_err(),
            "a connection over the cap was served: {early:?}"
        );

        // One closes: the waiting connection takes its place and is answered.
        drop(first);
        let sent = read_until_closed(&mut third, CLOSED_WITHIN).await;
        assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");

        // The other is still held, and answers when asked.
        second.write_all(HEALTHZ).await.unwrap();
        let sent = read_until_closed(&mut second, CLOSED_WITHIN).await;
        assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");
    })
    .await;
}

/// A connection to `s` from `local`, an address of the loopback network (127.0.0.0/8).
async fn connect_from(s: &Server, local: [u8; 4]) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((local, 0))).unwrap();
    let server: std::net::SocketAddr = s.base.trim_start_matches("http://").parse().unwrap();
    socket.connect(server).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_at_most_its_share_and_another_is_served_beside_it() {
    on_both(|store| async move {
        let w = world(store).await;
        let state = AppState {
            connections: ConnLimits {
                max_connections: 4,
                max_per_address: 2,
                // Far beyond the test: only the per-address cap frees anything.
                header_timeout: Duration::from_secs(600),
                body_timeout: Duration::from_secs(60),
            },
            ..AppState::new(w.engine.clone())
        };
        let s = serve(state).await;
        let hog = [127, 0, 0, 1];
        let mut held = vec![connect_from(&s, hog).await, connect_from(&s, hog).await];

        // A third from the same address is closed as soon as it is accepted, unanswered.
        let mut third = connect_from(&s, hog).await;
        let _ = third.write_all(HEALTHZ).await;
        let sent = read_until_closed(&mut third, CLOSED_WITHIN).await;
        assert!(
            sent.is_empty(),
            "a connection over its address's share was served: {sent}"
        );

        // Another address is served at once beside the two held.
        let mut other = connect_from(&s, [127, 0, 0, 2]).await;
        other.write_all(HEALTHZ).await.unwrap();
        let sent = read_until_closed(&mut other, CLOSED_WITHIN).await;
        assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");

        // The held ones keep their places and answer when asked; once one closes, the address
        // may open another.
        let mut second = held.pop().unwrap();
        second.write_all(HEALTHZ).await.unwrap();
        let sent = read_until_closed(&mut second, CLOSED_WITHIN).await;
        assert!(sent.starts_with("HTTP/1.1 200"), "{sent}");
        // The server closed it after its answer, and frees its place as the connection's task
        // ends: asked again until then.
        let deadline = Instant::now() + CLOSED_WITHIN;
        loop {
            let mut again = connect_from(&s, hog).await;
            let _ = again.write_all(HEALTHZ).await;
            let sent = read_until_closed(&mut again, CLOSED_WITHIN).await;
            if sent.starts_with("HTTP/1.1 200") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the address's freed place was not given back: {sent:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(held);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_a_token_is_served_while_idle_connections_hold_every_place() {
    on_both(|store| async move {
        let w = world(store).await;
        let state = limited(
            AppState::new(w.engine.clone()),
            3,
            Duration::from_secs(1),
            Duration::from_secs(60),
        );
        let s = serve(state).await;
        let mut idle = Vec::new();
        for _ in 0..3 {
            idle.push(connect(&s).await);
        }
        // Every place is held by a connection that sends nothing; each is closed after the
        // header timeout, and the client waiting behind them is served.
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let r = tokio::time::timeout(
            CLOSED_WITHIN,
            client
                .get(format!("{}/v1/executions", s.base))
                .bearer_auth(w.token("ops"))
                .send(),
        )
        .await
        .expect("a client with a token was not served while idle connections were held")
        .unwrap();
        assert_eq!(r.status(), 200);
        for mut c in idle {
            let sent = read_until_closed(&mut c, CLOSED_WITHIN).await;
            assert!(!sent.contains("200 OK"), "{sent}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_outlives_the_header_timeout() {
    on_both(|store| async move {
        let w = world(store).await;
        let coder = w.engine.authenticate(w.token("coder")).await.unwrap();
        w.engine
            .put_subject(&coder, &subject(1, "d"))
            .await
            .unwrap();
        let state = limited(fast(&w), 16, Duration::from_secs(1), Duration::from_secs(1));
        let s = serve(state).await;
        let after = head_seq(&w).await;
        let mut stream = Stream::open(&s, w.token("ops"), &format!("?after={after}"), None).await;
        // Several header timeouts pass while the answer is being sent: it is not cut.
        tokio::time::sleep(Duration::from_secs(3)).await;
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        let got = stream.until("gate_decision").await;
        assert_eq!(got.last().unwrap().data["execution"], EXEC);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_server_closes_idle_connections() {
    on_both(|store| async move {
        let w = world(store).await;
        let state = limited(
            AppState::new(w.engine.clone()),
            16,
            Duration::from_secs(600),
            Duration::from_secs(600),
        );
        let s = serve(state).await;
        let mut idle = connect(&s).await;
        let mut kept_alive = connect(&s).await;
        kept_alive
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: verdict\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 1024];
        let n = kept_alive.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        drop(s);
        read_until_closed(&mut idle, CLOSED_WITHIN).await;
        read_until_closed(&mut kept_alive, CLOSED_WITHIN).await;
    })
    .await;
}
