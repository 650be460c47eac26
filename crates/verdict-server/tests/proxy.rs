//! A proxy named by the environment never sees a plain-http request: the CLI's client to a
//! loopback server and webhook deliveries to a loopback receiver go straight to it.
//!
//! A binary of its own with a single test, because it sets the process's proxy variables.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A listener answering every connection `200 {}` and counting them.
fn listener() -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for mut conn in l.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            conn.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn plain_http_to_the_loopback_never_goes_through_a_proxy() {
    let (proxy, proxied) = listener();
    let (target, reached) = listener();
    #[expect(
        unsafe_code,
        reason = "the proxy variables of this single-test process"
    )]
    // SAFETY: this binary runs this one test; nothing else reads the environment meanwhile.
    unsafe {
        for var in ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"] {
            std::env::set_var(var, format!("http://{proxy}"));
        }
    }
    let client =
        verdict_server::client::Client::new(&format!("http://{target}"), Some("vdt_secret".into()))
            .unwrap();
    let answer: Result<serde_json::Value, _> = client.get("v1/executions/ex-1/status").await;
    assert!(answer.is_ok(), "{answer:?}");
    let hooks = verdict_server::webhooks::delivery_client(
        &format!("http://{target}/hook"),
        Duration::from_secs(5),
    )
    .unwrap();
    let sent = hooks
        .post(format!("http://{target}/hook"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert!(sent.status().is_success());
    assert_eq!(proxied.load(Ordering::SeqCst), 0, "the proxy saw a request");
    assert_eq!(reached.load(Ordering::SeqCst), 2);
}
