//! API keys come from the environment and appear nowhere else: not in Debug output, errors,
//! receipts, manifests, results or prompts, even when a server echoes them back.
//!
//! Nor do they reach a proxy the environment names when the model server is a plain-http one
//! on this machine; an https endpoint, whatever the case of its scheme, may tunnel through it.
//!
//! This binary holds a single test because it sets process environment variables.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "integration/common/mod.rs"]
mod common;

use common::*;
use verdict_core::contracts::VerificationStatus;
use verdict_judge::Judge;
use verdict_judge::config::{ConfigError, VerifiersFile};

const VAR: &str = "VERDICT_JUDGE_TEST_KEY";
const KEY: &str = "sk-live-5ecret-c0ffee-0123456789";

fn verifiers(url: &str, kind: &str) -> VerifiersFile {
    let yaml = format!(
        "version: 1\nclasses:\n  reviewer:\n    provider:\n      kind: {kind}\n      base_url: \"{url}\"\n      model: judge-model\n      api_key_env: {VAR}\n    budget: {{timeout_s: 5, max_attempts: 2, backoff_ms: 5}}\n"
    );
    VerifiersFile::parse(yaml.as_bytes(), "verifiers.yaml").unwrap()
}

#[tokio::test]
async fn keys_never_leave_the_header() {
    let dir = std::path::Path::new(".");
    // Unset: the error names the variable, never a value.
    let err = Judge::from_config(
        &verifiers("http://127.0.0.1:9/v1", "openai"),
        "reviewer",
        dir,
    )
    .unwrap_err();
    assert!(
        matches!(&err, verdict_judge::JudgeError::Config(ConfigError::MissingKey { var, .. }) if var == VAR),
        "{err}"
    );

    // A "proxy" the environment names: it counts the connections it gets. A key sent to a
    // plain-http model server on this machine must never reach it.
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let proxied = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = proxied.clone();
    tokio::spawn(async move {
        while proxy.accept().await.is_ok() {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });

    // SAFETY: this test binary runs this one test, so no other thread reads the environment.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var(VAR, KEY);
        for proxy_var in [
            "http_proxy",
            "HTTP_PROXY",
            "https_proxy",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "all_proxy",
        ] {
            std::env::set_var(proxy_var, &proxy_url);
        }
        for exempt in ["no_proxy", "NO_PROXY"] {
            std::env::remove_var(exempt);
        }
    }

    for kind in ["openai", "anthropic"] {
        // A server that echoes the credentials it received: in an error body first, then in
        // the fields a successful answer reports.
        let server = FakeServer::start(move |r| {
            let creds = r
                .header("authorization")
                .or_else(|| r.header("x-api-key"))
                .unwrap_or_default();
            if r.index == 0 {
                return Answer::raw(503, &format!("{{\"error\": \"bad credentials {creds}\"}}"));
            }
            let mut reply = good_reply(&r.nonce());
            reply["criteria"][0]["rationale"] = serde_json::Value::String(creds.clone());
            let mut env = if kind == "openai" {
                openai_envelope(&reply.to_string())
            } else {
                anthropic_envelope(&reply)
            };
            env["system_fingerprint"] = serde_json::Value::String(creds.clone());
            env["model"] = serde_json::Value::String(creds);
            Answer::json(&env)
        })
        .await;
        let judge = Judge::from_config(&verifiers(&server.url, kind), "reviewer", dir).unwrap();
        let run = judge.run(&request()).await.unwrap();
        assert_eq!(
            run.result.status,
            VerificationStatus::Completed,
            "{kind}: {:?}",
            run.detail
        );

        let got = server.received();
        let sent = got[0]
            .header("authorization")
            .or_else(|| got[0].header("x-api-key"))
            .unwrap();
        assert!(sent.contains(KEY), "{kind}: the key is sent");
        let (system, user) = got[0].prompt();
        assert!(
            !system.contains(KEY) && !user.contains(KEY),
            "{kind}: key in the prompt"
        );

        let everything = format!(
            "{judge:?}\n{run:?}\n{}\n{}",
            serde_json::to_string(&run).unwrap(),
            serde_json::to_string(&verifiers(&server.url, kind)).unwrap()
        );
        assert!(!everything.contains(KEY), "{kind}: key leaked");
        assert!(run.receipts[0].outcome == "http_503");
        assert_eq!(
            run.receipts[1]
                .snapshot
                .as_deref()
                .map(|s| s.contains("[redacted]")),
            Some(true),
            "{kind}"
        );
        // What the model wrote is cleaned before it is kept.
        assert!(run.rationales[0][0].1.contains("[redacted]"), "{kind}");
    }
    assert_eq!(
        proxied.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a plain-http call went through the proxy"
    );

    // An endpoint spelt `HTTPS://` is https, by its parsed scheme: its client may tunnel
    // through the proxy (the key travels inside TLS), as every https client may. Taken for
    // plain http, it would have gone to the host directly and the proxy would see nothing.
    let judge = Judge::from_config(
        &verifiers("HTTPS://verdict-judge-test.invalid/v1", "openai"),
        "reviewer",
        dir,
    )
    .unwrap();
    let run = judge.run(&request()).await.unwrap();
    assert_eq!(run.result.status, VerificationStatus::Unavailable);
    assert!(
        proxied.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "an https call never reached the proxy: {:?}",
        run.detail
    );
}
