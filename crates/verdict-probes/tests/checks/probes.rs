//! Each probe kind against real servers, processes and files.

use crate::common::{
    Http, Rr, closed_port, dns, dns_answering, expire_in, https, https_answering, https_swapping,
    issue, issue_under, pki, raw_http, result, run, run_during, spec, step,
};
use std::net::Ipv4Addr;
use verdict_core::contracts::CheckOutcome::{self, Error, Fail, Pass};

/// Runs one assert-mode criterion with `probe` and returns its outcome and reason.
async fn probe(probe: &str) -> (CheckOutcome, String, serde_json::Value) {
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: p\n    mode: assert\n    probe: {probe}\n"
    ));
    let r = run(&s).await;
    let p = result(&r, "p");
    let facts = serde_json::to_value(p.observations.first().map(|o| o.facts.clone())).unwrap();
    (p.outcome, p.reason.clone(), facts)
}

#[tokio::test]
async fn http_status_headers_body_and_cel() {
    let h = Http::start().await;
    h.script(
        "ok",
        vec![step(200, r#"{"status": "ok", "items": [1, 2]}"#)],
    );
    h.script("down", vec![step(503, "unavailable")]);
    let ok = h.url("/s/ok");
    let (o, why, facts) = probe(&format!(
        "{{kind: http, url: '{ok}', status: 200, body: {{contains: '\"ok\"'}}, response_headers: {{x-served-by: {{equals: verdict-test}}}}, expect: \"self.status == 'ok' && size(self.items) == 2\"}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    assert_eq!(facts["status"], 200);

    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{}', status: [200, 204]}}",
        h.url("/s/down")
    ))
    .await;
    assert_eq!(o, Fail);
    assert!(why.contains("status 503"), "{why}");
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{ok}', body: {{not_matches: 'items'}}}}"
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{ok}', response_headers: {{x-missing: {{contains: a}}}}}}"
    ))
    .await;
    assert_eq!(o, Fail);
    assert!(why.contains("header x-missing missing"), "{why}");
    let (o, _, _) = probe(&format!(
        "{{kind: http, url: '{ok}', expect: \"self.status == 'down'\"}}"
    ))
    .await;
    assert_eq!(o, Fail);
}

#[tokio::test]
async fn http_cel_over_a_missing_field_is_an_error_not_a_fail() {
    let h = Http::start().await;
    h.script("ok", vec![step(200, r#"{"status": "ok"}"#)]);
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{}', expect: \"self.ready == true\"}}",
        h.url("/s/ok")
    ))
    .await;
    assert_eq!(o, Error, "{why}");
    assert!(why.contains("could not be evaluated"), "{why}");
    h.script("text", vec![step(200, "not json")]);
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{}', expect: \"self.ok\"}}",
        h.url("/s/text")
    ))
    .await;
    assert_eq!(o, Error);
    assert!(why.contains("not json"), "{why}");
}

#[tokio::test]
async fn http_sends_method_headers_and_body() {
    let h = Http::start().await;
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{}', method: post, headers: {{x-token: abc}}, request_body: hello, expect: \"self.method == 'POST' && self.headers['x-token'] == 'abc' && self.body == 'hello'\"}}",
        h.url("/echo")
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
}

#[tokio::test]
async fn redirects_are_observations_unless_followed() {
    let h = Http::start().await;
    h.script("target", vec![step(200, "arrived")]);
    let url = h.url("/redirect/target");
    let (o, why, facts) = probe(&format!("{{kind: http, url: '{url}'}}")).await;
    assert_eq!(o, Fail, "{why}");
    assert_eq!(facts["status"], 302);
    assert_eq!(
        probe(&format!("{{kind: http, url: '{url}', status: 302}}"))
            .await
            .0,
        Pass
    );
    let (o, why, facts) = probe(&format!(
        "{{kind: http, url: '{url}', follow_redirects: true, body: {{equals: arrived}}}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    assert_eq!(h.hits("target"), 1);
    // What was judged came from elsewhere than the url: the facts say where.
    assert_eq!(facts["redirects"], 1);
    assert_eq!(facts["final_url"], h.url("/s/target"));
    let (o, why, facts) = probe(&format!("{{kind: http, url: '{}'}}", h.url("/s/target"))).await;
    assert_eq!(o, Pass, "{why}");
    assert!(facts.get("final_url").is_none(), "{facts}");
}

/// A redirect to another origin would carry the spec's headers (credentials among them) and
/// body there and judge that origin's answer as the system's.
#[tokio::test]
async fn redirects_leaving_the_urls_origin_are_errors_and_not_followed() {
    let h = Http::start().await;
    let other = Http::start().await;
    other.script("target", vec![step(200, "arrived")]);
    let away = |to: String| {
        let q: String = url::form_urlencoded::byte_serialize(to.as_bytes()).collect();
        h.url(&format!("/goto?to={q}"))
    };
    let same_host_other_name = format!("http://localhost:{}/s/target", h.addr.port());
    h.script("target", vec![step(200, "arrived")]);
    for (to, how) in [
        (other.url("/s/target"), "leaves the url's origin"),
        (same_host_other_name, "leaves the url's origin"),
        (
            format!("https://127.0.0.1:{}/s/target", h.addr.port()),
            "leaves the url's origin",
        ),
        ("ftp://127.0.0.1/x".to_owned(), "leaves the url's origin"),
    ] {
        let (o, why, _) = probe(&format!(
            "{{kind: http, url: '{}', headers: {{authorization: 'Bearer s3cret', cookie: 'sid=1'}}, follow_redirects: true, body: {{equals: arrived}}}}",
            away(to.clone())
        ))
        .await;
        assert_eq!(o, Error, "{to}: {why}");
        assert!(why.contains(&format!("redirect to {to:?} {how}")), "{why}");
        assert!(why.contains(&format!("http://{}", h.addr)), "{why}");
    }
    assert_eq!(other.hits("target"), 0, "the other origin was asked");
    assert_eq!(
        h.hits("target"),
        0,
        "another name for the host was followed"
    );

    // From https to plain http.
    let p = pki(&["localhost"], (2035, 1, 1));
    let to = other.url("/s/target");
    let tls = https_answering(
        &p,
        format!(
            "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )
        .into_bytes(),
    )
    .await;
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: 'https://localhost:{}/', tls: {{ca: '{}'}}, follow_redirects: true}}",
        tls.port(),
        p.ca_path.display()
    ))
    .await;
    assert_eq!(o, Error, "{why}");
    assert!(
        why.contains(&format!("redirect to {to:?} downgrades https to http")),
        "{why}"
    );
    assert_eq!(other.hits("target"), 0);

    // A loop within the origin ends at the bound, as an error.
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{}', follow_redirects: true, status: 302}}",
        h.url("/goto?to=%2Fgoto")
    ))
    .await;
    assert_eq!(o, Error, "{why}");
    assert!(why.contains("more than 10 redirects"), "{why}");
}

/// `Cache-Control: no-store` then `Cache-Control: public, max-age=600`: the second line is as
/// much the answer as the first.
#[tokio::test]
async fn a_response_field_sent_twice_is_judged_on_all_its_lines() {
    let addr = raw_http(
        b"HTTP/1.1 200 OK\r\ncache-control: no-store\r\ncache-control: public, max-age=600\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok".to_vec(),
    )
    .await;
    let url = format!("http://{addr}/");
    let (o, why, facts) = probe(&format!(
        "{{kind: http, url: '{url}', response_headers: {{cache-control: {{not_matches: public}}}}}}"
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    assert_eq!(
        facts["headers"]["cache-control"],
        "no-store, public, max-age=600"
    );
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{url}', response_headers: {{cache-control: {{equals: no-store}}}}}}"
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{url}', response_headers: {{cache-control: {{matches: '^no-store, public'}}}}}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
}

/// `internal error: database down`, gzip'd: judged as compressed bytes it has no `error` in it.
const GZIPPED_ERROR: [u8; 49] = [
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0xcc, 0x2b, 0x49, 0x2d, 0xca,
    0x4b, 0xcc, 0x51, 0x48, 0x2d, 0x2a, 0xca, 0x2f, 0xb2, 0x52, 0x48, 0x49, 0x2c, 0x49, 0x4c, 0x4a,
    0x2c, 0x4e, 0x55, 0x48, 0xc9, 0x2f, 0xcf, 0x03, 0x00, 0xc2, 0x8e, 0x4a, 0x12, 0x1d, 0x00, 0x00,
    0x00,
];

#[tokio::test]
async fn an_encoded_body_is_an_error_not_judged_as_its_bytes() {
    let answer = |fields: &str, body: &[u8]| {
        let mut a = format!("HTTP/1.1 200 OK\r\n{fields}connection: close\r\n\r\n").into_bytes();
        a.extend_from_slice(body);
        a
    };
    let mut chunked = b"31\r\n".to_vec();
    chunked.extend_from_slice(&GZIPPED_ERROR);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    for (fields, body, coding) in [
        (
            "content-encoding: gzip\r\ncontent-length: 49\r\n",
            GZIPPED_ERROR.to_vec(),
            "content-encoding: gzip",
        ),
        (
            "content-encoding: identity, GZIP\r\ncontent-length: 49\r\n",
            GZIPPED_ERROR.to_vec(),
            "content-encoding: GZIP",
        ),
        (
            "transfer-encoding: gzip, chunked\r\n",
            chunked,
            "transfer-encoding: gzip",
        ),
    ] {
        let addr = raw_http(answer(fields, &body)).await;
        for def in [
            format!("{{kind: http, url: 'http://{addr}/', body: {{not_matches: error}}}}"),
            format!("{{kind: json, source: {{url: 'http://{addr}/'}}, expect: 'true'}}"),
        ] {
            let (o, why, _) = probe(&def).await;
            assert_eq!(o, Error, "{def}: {why}");
            assert!(why.contains(coding), "{why}");
        }
        // A probe of the status alone reads no body: a compressing server still answers it.
        let addr = raw_http(answer(fields, &body)).await;
        let def = format!("{{kind: http, url: 'http://{addr}/', status: 200}}");
        let (o, why, _) = probe(&def).await;
        assert_eq!(o, Pass, "{def}: {why}");
    }
    // Without a coding, or with `identity`, the body is the text.
    let addr = raw_http(answer(
        "content-encoding: identity\r\ncontent-length: 2\r\n",
        b"ok",
    ))
    .await;
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: 'http://{addr}/', body: {{equals: ok}}}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
}

/// verdict asks for no coding: the request carries no Accept-Encoding.
#[tokio::test]
async fn requests_ask_for_no_content_coding() {
    let h = Http::start().await;
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{}', expect: \"!('accept-encoding' in self.headers)\"}}",
        h.url("/echo")
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
}

#[tokio::test]
async fn http_connection_refused_is_an_error() {
    let port = closed_port().await;
    let (o, why, _) = probe(&format!("{{kind: http, url: 'http://127.0.0.1:{port}/'}}")).await;
    assert_eq!(o, Error, "{why}");
}

#[tokio::test]
async fn https_verifies_against_the_given_ca_and_refuses_otherwise() {
    let p = pki(&["localhost", "127.0.0.1"], (2035, 1, 1));
    let addr = https(&p).await;
    let ca = p.ca_path.display();
    let url = format!("https://localhost:{}/", addr.port());
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{url}', body: {{equals: 'secure ok'}}, tls: {{ca: '{ca}'}}}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    // Verification is on by default: the test CA is not in the system store.
    let (o, why, facts) = probe(&format!("{{kind: http, url: '{url}'}}")).await;
    assert_eq!(o, Fail, "{why}");
    assert!(why.contains("certificate refused"), "{why}");
    assert!(
        facts["tls"]
            .as_str()
            .unwrap()
            .contains("certificate refused")
    );
    // A name the certificate does not cover is refused too.
    let other = pki(&["example.invalid"], (2035, 1, 1));
    let addr2 = https(&other).await;
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: 'https://localhost:{}/', tls: {{ca: '{}'}}}}",
        addr2.port(),
        other.ca_path.display()
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    // Only an explicit insecure turns verification off.
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: '{url}', tls: {{insecure: true}}}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
}

/// A server that shows a trusted certificate once, then an untrusted one: a later connection
/// that resumed the first session would see no certificate and pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_swapped_after_the_first_connection_is_refused_not_resumed_past() {
    let trusted = pki(&["localhost"], (2035, 1, 1));
    let untrusted = pki(&["localhost"], (2035, 1, 1));
    let addr = https_swapping(&trusted, &untrusted).await;
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: h\n    role: safety\n    mode: hold\n    window: 300ms\n    interval: 100ms\n    probe: {{kind: http, url: 'https://localhost:{}/', tls: {{ca: '{}'}}}}\n",
        addr.port(),
        trusted.ca_path.display()
    ));
    let r = run(&s).await;
    let c = result(&r, "h");
    assert_eq!(c.outcome, Fail, "{}", c.reason);
    assert!(c.reason.contains("certificate refused"), "{}", c.reason);
    assert_eq!(
        c.samples, 2,
        "the first sample passes, the second is refused"
    );
}

/// A leaf valid for years under a `ca` root that expired yesterday, the server presenting the
/// leaf alone: webpki does not judge the anchor's dates, the probes do.
#[tokio::test]
async fn a_trust_anchor_out_of_date_refuses_the_chain_and_counts_for_min_days() {
    let root_until = |secs_from_now: i64| {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.not_before = rcgen::date_time_ymd(2020, 1, 1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let at = now.checked_add_signed(secs_from_now).unwrap();
        ca.not_after = rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(at);
        let mut leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        expire_in(&mut leaf, 400 * 86_400);
        let mut p = issue_under(ca, leaf, None);
        p.chain.truncate(1);
        p
    };
    let expired = root_until(-86_400);
    let addr = https(&expired).await;
    let ca = expired.ca_path.display();
    let (o, why, facts) = probe(&format!(
        "{{kind: tls, address: '127.0.0.1:{}', server_name: localhost, ca: '{ca}', min_days: 30}}",
        addr.port()
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    assert!(why.contains("certificate refused: trust anchor"), "{why}");
    assert!(why.contains("expired"), "{why}");
    assert_eq!(facts["verified"], false);
    assert_eq!(facts["chain_expires_first"]["anchor"], true, "{facts}");
    let (o, why, _) = probe(&format!(
        "{{kind: http, url: 'https://localhost:{}/', tls: {{ca: '{ca}'}}}}",
        addr.port()
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    assert!(why.contains("trust anchor"), "{why}");
    assert!(why.contains("expired"), "{why}");
    // An anchor in date verifies, and its expiry is the chain's when it comes first.
    let soon = root_until(10 * 86_400 + 3_600);
    let addr = https(&soon).await;
    let tls = format!(
        "kind: tls, address: '127.0.0.1:{}', server_name: localhost, ca: '{}'",
        addr.port(),
        soon.ca_path.display()
    );
    let (o, why, facts) = probe(&format!("{{{tls}, min_days: 30}}")).await;
    assert_eq!(o, Fail, "{why}");
    assert!(
        why.contains("expires in 10 days, when the trust anchor (CN=Verdict Test CA"),
        "{why}"
    );
    assert_eq!(facts["verified"], true);
    assert_eq!(facts["chain_expires_first"]["position"], 1);
    assert_eq!(facts["chain_expires_first"]["anchor"], true);
    let (o, why, _) = probe(&format!("{{{tls}, min_days: 5}}")).await;
    assert_eq!(o, Pass, "{why}");
}

/// A body in another charset, or not UTF-8, is not read as UTF-8 for a text expectation: UTF-16
/// `Internal error` has no `error` in it as UTF-8, and neither has `err\xffor` once replaced.
#[tokio::test]
async fn a_body_not_in_utf8_is_an_error_for_text_expectations() {
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain("Internal error".encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    let answer = |content_type: &str, body: &[u8]| {
        let mut a = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        a.extend_from_slice(body);
        a
    };
    for (content_type, body, wanted) in [
        ("text/plain; charset=utf-16", &utf16[..], "\"utf-16\""),
        (
            "text/plain; Charset=\"UTF-16LE\"",
            &utf16[..],
            "\"UTF-16LE\"",
        ),
        (
            "text/plain; charset=iso-8859-1",
            &b"all good"[..],
            "\"iso-8859-1\"",
        ),
        ("text/plain", &b"Internal err\xffor"[..], "not UTF-8 text"),
        (
            "text/plain; charset=utf-8",
            &b"err\xffor"[..],
            "not UTF-8 text",
        ),
        // Without a charset: UTF-16LE of ASCII is valid UTF-8 with NUL bytes.
        ("text/plain", &utf16[2..], "holds NUL bytes: UTF-16?"),
        ("text/plain", &utf16[..], "UTF-16LE byte-order mark"),
    ] {
        let addr = raw_http(answer(content_type, body)).await;
        let (o, why, _) = probe(&format!(
            "{{kind: http, url: 'http://{addr}/', body: {{not_matches: '(?i)error'}}}}"
        ))
        .await;
        assert_eq!(o, Error, "{content_type}: {why}");
        assert!(why.contains(wanted), "{content_type}: {why}");
    }
    for content_type in [
        "text/plain; charset=\"UTF-8\"",
        "text/plain; charset=US-ASCII",
    ] {
        let addr = raw_http(answer(content_type, b"all good")).await;
        let (o, why, _) = probe(&format!(
            "{{kind: http, url: 'http://{addr}/', body: {{not_matches: '(?i)error'}}}}"
        ))
        .await;
        assert_eq!(o, Pass, "{content_type}: {why}");
    }
}

/// UTF-16 `Internal error` holds no `error` as UTF-8, so a `not_matches` (or a log's `max: 0`)
/// would pass on it: `command` output, `file` content and `log` lines read only UTF-8 text
/// without NUL bytes, and anything else is an error naming why.
#[tokio::test]
async fn utf16_text_is_an_error_for_every_text_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let utf16: Vec<u8> = "Internal error\n"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    let with_bom: Vec<u8> = [0xFF, 0xFE].into_iter().chain(utf16.clone()).collect();
    let cases = [
        (&utf16[..], "holds NUL bytes: UTF-16?"),
        (&with_bom[..], "is not UTF-8 text"),
        (&b"Internal err\xffor\n"[..], "is not UTF-8 text"),
    ];
    for (i, (bytes, wanted)) in cases.into_iter().enumerate() {
        let f = dir.path().join(format!("out-{i}.txt"));
        std::fs::write(&f, bytes).unwrap();
        let p = f.display();
        for (kind, probe_text) in [
            (
                "stdout",
                format!(
                    "{{kind: command, argv: [cat, '{p}'], stdout: {{not_matches: '(?i)error'}}}}"
                ),
            ),
            (
                "stderr",
                format!(
                    "{{kind: command, shell: 'cat \"{p}\" >&2', stderr: {{not_matches: '(?i)error'}}}}"
                ),
            ),
            (
                "file",
                format!("{{kind: file, path: '{p}', content: {{not_matches: '(?i)error'}}}}"),
            ),
            (
                "log",
                format!("{{kind: log, file: '{p}', matches: '(?i)error', count: {{max: 0}}}}"),
            ),
        ] {
            let (o, why, _) = probe(&probe_text).await;
            assert_eq!(o, Error, "{kind} case {i}: {why}");
            assert!(why.contains(wanted), "{kind} case {i}: {why}");
        }
    }
    // UTF-8 text is still judged.
    let f = dir.path().join("fine.txt");
    std::fs::write(&f, "all good \u{e9}\n").unwrap();
    let p = f.display();
    let (o, why, _) = probe(&format!(
        "{{kind: command, argv: [cat, '{p}'], stdout: {{not_matches: '(?i)error'}}}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
}

#[tokio::test]
async fn tcp_open_and_closed() {
    let h = Http::start().await;
    let port = closed_port().await;
    assert_eq!(
        probe(&format!("{{kind: tcp, address: '{}'}}", h.addr))
            .await
            .0,
        Pass
    );
    assert_eq!(
        probe(&format!("{{kind: tcp, address: '127.0.0.1:{port}'}}"))
            .await
            .0,
        Fail
    );
    assert_eq!(
        probe(&format!(
            "{{kind: tcp, address: '127.0.0.1:{port}', expect: closed}}"
        ))
        .await
        .0,
        Pass
    );
    assert_eq!(
        probe(&format!(
            "{{kind: tcp, address: '{}', expect: closed}}",
            h.addr
        ))
        .await
        .0,
        Fail
    );
}

#[tokio::test]
async fn dns_against_a_given_server() {
    let server = dns(&[(
        "web.test",
        &[Ipv4Addr::new(10, 0, 0, 7), Ipv4Addr::new(10, 0, 0, 8)],
    )])
    .await;
    let (o, why, facts) = probe(&format!(
        "{{kind: dns, name: web.test., server: '{server}', contains: [10.0.0.7]}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    assert_eq!(
        facts["answers"],
        serde_json::json!(["10.0.0.7", "10.0.0.8"])
    );
    let (o, why, _) = probe(&format!(
        "{{kind: dns, name: web.test., server: '{server}', equals: [10.0.0.8, 10.0.0.7]}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    let (o, why, _) = probe(&format!(
        "{{kind: dns, name: web.test., server: '{server}', equals: [10.0.0.7]}}"
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    let (o, why, _) = probe(&format!(
        "{{kind: dns, name: gone.test., server: '{server}'}}"
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    assert!(why.contains("has no"), "{why}");
    let (o, why, _) = probe(&format!(
        "{{kind: dns, name: gone.test., server: '{server}', resolves: false}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
}

/// A server answering `web.test A?` with records for other names as well: only the name asked
/// and the names its CNAME chain in the answer leads to count.
#[tokio::test]
async fn dns_counts_only_records_about_the_name_asked() {
    let ip = Ipv4Addr::new;
    let server = dns_answering(vec![
        (
            "web.test",
            vec![
                Rr::A("WEB.Test.", ip(10, 0, 0, 9)),
                Rr::A("other.test", ip(10, 0, 0, 5)),
            ],
        ),
        (
            "alias.test",
            vec![
                Rr::A("lb.test", ip(10, 0, 0, 9)),
                Rr::Cname("other.test", "evil.test"),
                Rr::A("evil.test", ip(10, 0, 0, 6)),
                Rr::Cname("alias.test", "mid.test"),
                Rr::Cname("mid.test", "lb.test"),
                Rr::A("other.test", ip(10, 0, 0, 5)),
            ],
        ),
    ])
    .await;
    for name in ["web.test", "web.test.", "alias.test."] {
        let (o, why, facts) = probe(&format!(
            "{{kind: dns, name: '{name}', server: '{server}', equals: [10.0.0.9]}}"
        ))
        .await;
        assert_eq!(o, Pass, "{name}: {why}");
        assert_eq!(facts["answers"], serde_json::json!(["10.0.0.9"]), "{name}");
        let (o, why, _) = probe(&format!(
            "{{kind: dns, name: '{name}', server: '{server}', contains: [10.0.0.5]}}"
        ))
        .await;
        assert_eq!(o, Fail, "{name}: {why}");
    }
}

/// NXDOMAIN with an address beside it: the server said the name does not exist.
#[tokio::test]
async fn dns_nxdomain_carrying_records_does_not_resolve() {
    let server = dns_answering(vec![(
        "gone.test",
        vec![
            Rr::NxDomain,
            Rr::A("gone.test", Ipv4Addr::new(10, 0, 0, 66)),
        ],
    )])
    .await;
    let (o, why, facts) = probe(&format!(
        "{{kind: dns, name: gone.test., server: '{server}', contains: [10.0.0.66]}}"
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    assert!(
        why.contains("has no A record (the answer is NXDomain)"),
        "{why}"
    );
    assert_eq!(facts["answers"], serde_json::json!([]));
    assert_eq!(facts["response_code"], "NXDomain");
    let (o, why, _) = probe(&format!(
        "{{kind: dns, name: gone.test., server: '{server}', resolves: false}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
}

/// Addresses for the name asked, or for its CNAME target, given only in the additional section
/// are not answers: beside the CNAME they are not counted; in the response to the chased target
/// the resolver lifts them into the answer, and the observation is an error.
#[tokio::test]
async fn dns_counts_no_record_from_outside_the_answer_section() {
    let ip = Ipv4Addr::new;
    let server = dns_answering(vec![
        (
            "glue.test",
            vec![
                Rr::Cname("glue.test", "lb.test"),
                Rr::Additional("lb.test", ip(10, 0, 0, 66)),
                Rr::Additional("glue.test", ip(10, 0, 0, 67)),
            ],
        ),
        ("hop.test", vec![Rr::Cname("hop.test", "far.test")]),
        (
            "far.test",
            vec![Rr::Additional("far.test", ip(10, 0, 0, 66))],
        ),
    ])
    .await;
    let (o, why, facts) = probe(&format!(
        "{{kind: dns, name: glue.test., server: '{server}', contains: [10.0.0.66]}}"
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    assert_eq!(facts["answers"], serde_json::json!([]));
    for rest in ["contains: [10.0.0.66]", "resolves: false"] {
        let (o, why, _) = probe(&format!(
            "{{kind: dns, name: hop.test., server: '{server}', {rest}}}"
        ))
        .await;
        assert_eq!(o, Error, "{rest}: {why}");
        assert!(why.contains("outside its answer section"), "{rest}: {why}");
    }
}

#[tokio::test]
async fn files_by_type_mode_size_hash_and_content() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("app.conf");
    std::fs::write(&f, "port = 8080\nmode = prod\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.path().join("current");
    std::os::unix::fs::symlink(&f, &link).unwrap();
    let hex = verdict_core::digest::raw(b"port = 8080\nmode = prod\n").to_string();
    let hex = hex.trim_start_matches("sha256:");
    let p = f.display();
    let (o, why, _) = probe(&format!(
        "{{kind: file, path: '{p}', type: file, mode: '0640', size: {{min: 10, max: 100}}, sha256: '{hex}', content: {{matches: 'port = \\d+', not_matches: debug}}}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    let (o, why, _) = probe(&format!("{{kind: file, path: '{p}', mode: '0644'}}")).await;
    assert_eq!(o, Fail);
    assert!(why.contains("mode 0640"), "{why}");
    let uid = std::fs::metadata(&f)
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap();
    assert_eq!(
        probe(&format!("{{kind: file, path: '{p}', owner: '{uid}'}}"))
            .await
            .0,
        Pass
    );
    assert_eq!(
        probe(&format!(
            "{{kind: file, path: '{p}', owner: '{}'}}",
            uid + 1
        ))
        .await
        .0,
        Fail
    );
    assert_eq!(
        probe(&format!(
            "{{kind: file, path: '{p}', sha256: '{}'}}",
            "0".repeat(64)
        ))
        .await
        .0,
        Fail
    );
    assert_eq!(
        probe(&format!(
            "{{kind: file, path: '{}', type: symlink}}",
            link.display()
        ))
        .await
        .0,
        Pass
    );
    assert_eq!(
        probe(&format!(
            "{{kind: file, path: '{}', type: dir}}",
            dir.path().display()
        ))
        .await
        .0,
        Pass
    );
    assert_eq!(
        probe(&format!(
            "{{kind: file, path: '{}/nope', exists: false}}",
            dir.path().display()
        ))
        .await
        .0,
        Pass
    );
    assert_eq!(
        probe(&format!(
            "{{kind: file, path: '{}/nope'}}",
            dir.path().display()
        ))
        .await
        .0,
        Fail
    );
    let (o, why, _) = probe(&format!(
        "{{kind: file, path: '{p}', content: {{contains: port}}, max_output: 5}}"
    ))
    .await;
    assert_eq!(
        o, Error,
        "content larger than the cap cannot be judged: {why}"
    );
}

#[tokio::test]
async fn file_probes_pinning_a_hash_give_content_freshness() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("a");
    std::fs::write(&f, "x").unwrap();
    let hex = verdict_core::digest::raw(b"x").to_string();
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: pinned\n    mode: assert\n    probe: {{kind: file, path: '{}', sha256: '{hex}'}}\n  - id: live\n    mode: assert\n    max_age: 2m\n    probe: {{kind: file, path: '{}'}}\n",
        f.display(),
        f.display()
    ));
    assert_eq!(
        s.checks[0].freshness(),
        verdict_core::contracts::Freshness::Content
    );
    assert_eq!(
        s.checks[1].freshness(),
        verdict_core::contracts::Freshness::Time { max_age_s: 120 }
    );
}

/// A probe pinning the hash together with the file's mode or owner observes those live: its
/// evidence ages like any other, or a pass on `mode: "0600"` would count forever after the
/// mode was opened up.
#[tokio::test]
async fn a_hash_with_live_properties_gives_time_freshness() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("a");
    std::fs::write(&f, "x").unwrap();
    let hex = verdict_core::digest::raw(b"x").to_string();
    let p = f.display();
    for extra in ["mode: '0600'", "owner: root", "group: root", "type: file"] {
        let s = spec(&format!(
            "version: 1\ncriteria:\n  - id: live\n    mode: assert\n    max_age: 2m\n    probe: {{kind: file, path: '{p}', sha256: '{hex}', {extra}}}\n"
        ));
        assert_eq!(
            s.checks[0].freshness(),
            verdict_core::contracts::Freshness::Time { max_age_s: 120 },
            "{extra}"
        );
    }
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: bytes\n    mode: assert\n    probe: {{kind: file, path: '{p}', sha256: '{hex}', size: {{max: 10}}, content: {{contains: x}}}}\n"
    ));
    assert_eq!(
        s.checks[0].freshness(),
        verdict_core::contracts::Freshness::Content
    );
}

#[tokio::test]
async fn commands_exit_code_streams_and_json() {
    let (o, why, facts) = probe(r#"{kind: command, argv: [sh, -c, 'echo "{\"n\": 3}"; echo warn >&2'], stdout: {matches: '"n"'}, stderr: {equals: "warn\n"}, expect: "self.n == 3"}"#).await;
    assert_eq!(o, Pass, "{why}");
    assert_eq!(facts["exit_code"], 0);
    let (o, why, _) = probe("{kind: command, argv: [sh, -c, 'exit 4']}").await;
    assert_eq!(o, Fail);
    assert!(why.contains("exit code 4"), "{why}");
    assert_eq!(
        probe("{kind: command, argv: [sh, -c, 'exit 4'], exit_code: 4}")
            .await
            .0,
        Pass
    );
    assert_eq!(
        probe("{kind: command, shell: 'test 1 -eq 1'}").await.0,
        Pass
    );
    let (o, why, _) =
        probe("{kind: command, argv: [sh, -c, 'echo {}'], expect: 'self.missing > 1'}").await;
    assert_eq!(o, Error, "{why}");
    let (o, why, _) = probe("{kind: command, argv: [sleep, '5'], timeout: 300ms}").await;
    assert_eq!(o, Error);
    assert!(why.contains("timed out after 300ms"), "{why}");
    let (o, why, _) =
        probe("{kind: command, argv: [sh, -c, 'head -c 5000 /dev/zero'], max_output: 1000}").await;
    assert_eq!(o, Error);
    assert!(why.contains("exceeds 1000 bytes"), "{why}");
    let (o, _, _) =
        probe("{kind: command, argv: [cat], stdin: hello, stdout: {equals: hello}}").await;
    assert_eq!(o, Pass);
}

#[tokio::test]
async fn argv_never_goes_through_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let text = format!("$(touch {m}); touch {m}", m = marker.display());
    let (o, why, _) = probe(&format!(
        "{{kind: command, argv: [echo, {}], stdout: {{equals: {}}}}}",
        serde_json::to_string(&text).unwrap(),
        serde_json::to_string(&format!("{text}\n")).unwrap()
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    assert!(!marker.exists(), "shell syntax in argv was interpreted");
}

#[tokio::test]
async fn output_is_bounded_in_results_with_the_digest_of_all_of_it() {
    let s = spec(
        "version: 1\ncriteria:\n  - id: big\n    mode: assert\n    probe: {kind: command, argv: [sh, -c, 'head -c 100000 /dev/zero | tr \"\\\\0\" a']}\n",
    );
    let r = run(&s).await;
    let o = &result(&r, "big").observations[0];
    let out = o.output.as_ref().unwrap();
    assert_eq!(out.bytes, 100_000);
    assert!(out.truncated);
    assert!(out.excerpt.len() <= verdict_probes::output::EXCERPT_BYTES);
    assert_eq!(out.digest, verdict_core::digest::raw(&vec![b'a'; 100_000]));
}

fn pods(names_phases: &[(&str, &str)]) -> String {
    let items: Vec<serde_json::Value> = names_phases
        .iter()
        .map(|(n, p)| {
            serde_json::json!({"metadata": {"name": n, "labels": {"app.kubernetes.io/name": "web"}}, "status": {"phase": p}})
        })
        .collect();
    serde_json::json!({"kind": "List", "items": items}).to_string()
}

async fn json_probe(doc: &str, rest: &str) -> (CheckOutcome, String) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("doc.json");
    std::fs::write(&f, doc).unwrap();
    let (o, why, _) = probe(&format!(
        "{{kind: json, source: {{file: '{}'}}, {rest}}}",
        f.display()
    ))
    .await;
    (o, why)
}

#[tokio::test]
async fn json_quantifiers_including_zero_matches() {
    let mixed = pods(&[("a", "Running"), ("b", "Pending"), ("c", "Running")]);
    let running = "expect: \"self.status.phase == 'Running'\"";
    let sel = "select: '$.items[*]'";
    assert_eq!(
        json_probe(&mixed, &format!("{sel}, {running}, quantifier: all"))
            .await
            .0,
        Fail
    );
    assert_eq!(
        json_probe(&mixed, &format!("{sel}, {running}, quantifier: any"))
            .await
            .0,
        Pass
    );
    assert_eq!(
        json_probe(&mixed, &format!("{sel}, {running}, quantifier: none"))
            .await
            .0,
        Fail
    );
    assert_eq!(
        json_probe(
            &mixed,
            &format!("{sel}, {running}, quantifier: {{count: {{min: 2, max: 2}}}}")
        )
        .await
        .0,
        Pass
    );
    assert_eq!(
        json_probe(
            &mixed,
            &format!("{sel}, {running}, quantifier: {{count: {{min: 3}}}}")
        )
        .await
        .0,
        Fail
    );
    let (o, why) = json_probe(&mixed, &format!("{sel}, {running}")).await;
    assert_eq!(o, Fail);
    assert!(why.contains("first that does not: $['items'][1]"), "{why}");

    let empty = pods(&[]);
    for q in ["all", "any", "none"] {
        let (o, why) = json_probe(&empty, &format!("{sel}, {running}, quantifier: {q}")).await;
        assert_eq!(o, Fail, "{q} over zero matches");
        assert!(why.contains("matched no object"), "{why}");
    }
    assert_eq!(
        json_probe(&empty, &format!("{sel}, quantifier: {{count: {{max: 0}}}}"))
            .await
            .0,
        Pass
    );
    assert_eq!(
        json_probe(&mixed, &format!("{sel}, quantifier: {{count: {{max: 0}}}}"))
            .await
            .0,
        Fail
    );
}

#[tokio::test]
async fn json_cel_missing_field_is_error_and_dotted_keys_work() {
    let doc = pods(&[("a", "Running")]);
    let (o, why) = json_probe(
        &doc,
        "select: '$.items[*]', expect: \"self.status.ready == true\"",
    )
    .await;
    assert_eq!(o, Error, "{why}");
    let (o, why) = json_probe(
        &doc,
        "select: \"$.items[?@.metadata.labels['app.kubernetes.io/name'] == 'web']\", expect: \"self.metadata.labels['app.kubernetes.io/name'] == 'web'\", quantifier: {count: {min: 1}}",
    )
    .await;
    assert_eq!(o, Pass, "{why}");
    let (o, why) = json_probe("{not json", "expect: 'true'").await;
    assert_eq!(o, Error, "{why}");
}

#[tokio::test]
async fn json_from_a_url_and_from_a_command() {
    let h = Http::start().await;
    h.script(
        "deploy",
        vec![step(
            200,
            r#"{"spec": {"replicas": 2}, "status": {"readyReplicas": 2}}"#,
        )],
    );
    let (o, why, _) = probe(&format!(
        "{{kind: json, source: {{url: '{}'}}, expect: 'self.status.readyReplicas == self.spec.replicas'}}",
        h.url("/s/deploy")
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    let (o, why, _) = probe(r#"{kind: json, source: {command: [sh, -c, 'echo "[1,2,3]"']}, select: '$[*]', expect: 'self > 0'}"#).await;
    assert_eq!(o, Pass, "{why}");
    let (o, why, _) =
        probe("{kind: json, source: {command: [sh, -c, 'echo oops >&2; exit 1']}, expect: 'true'}")
            .await;
    assert_eq!(o, Error);
    assert!(why.contains("oops"), "{why}");
}

#[tokio::test]
async fn tls_expiry_san_issuer_and_trust() {
    let p = pki(&["localhost", "127.0.0.1"], (2035, 1, 1));
    let addr = https(&p).await;
    let ca = p.ca_path.display();
    let a = format!("127.0.0.1:{}", addr.port());
    let (o, why, facts) = probe(&format!(
        "{{kind: tls, address: '{a}', server_name: localhost, ca: '{ca}', min_days: 30, san: [localhost, 127.0.0.1], issuer: {{contains: 'Verdict Test CA'}}}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    assert_eq!(facts["verified"], true);
    assert!(facts["days_left"].as_i64().unwrap() > 30);
    assert_eq!(facts["not_after"], "2035-01-01T00:00:00Z");
    let (o, why, _) = probe(&format!(
        "{{kind: tls, address: '{a}', server_name: localhost, ca: '{ca}', min_days: 100000}}"
    ))
    .await;
    assert_eq!(o, Fail);
    assert!(why.contains("expires in"), "{why}");
    let (o, _, _) = probe(&format!(
        "{{kind: tls, address: '{a}', server_name: localhost, ca: '{ca}', san: [other.test]}}"
    ))
    .await;
    assert_eq!(o, Fail);
    let (o, _, _) = probe(&format!("{{kind: tls, address: '{a}', server_name: localhost, ca: '{ca}', issuer: {{contains: Acme}}}}")).await;
    assert_eq!(o, Fail);
    // Untrusted by default, but what it presented is still reported.
    let (o, why, facts) = probe(&format!(
        "{{kind: tls, address: '{a}', server_name: localhost}}"
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    assert!(why.contains("certificate refused"), "{why}");
    assert_eq!(facts["verified"], false);
    assert_eq!(facts["not_after"], "2035-01-01T00:00:00Z");
    let (o, why, _) = probe(&format!(
        "{{kind: tls, address: '{a}', server_name: localhost, insecure: true, min_days: 1}}"
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
}

/// A leaf valid for 400 days under an intermediate that expires tomorrow: the chain stops
/// verifying tomorrow.
#[tokio::test]
async fn min_days_is_judged_on_every_certificate_the_server_presents() {
    let mut leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    expire_in(&mut leaf, 400 * 86_400);
    let mut mid = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    expire_in(&mut mid, 36 * 3_600);
    let p = issue(leaf, Some(mid));
    let addr = https(&p).await;
    let tls = format!(
        "kind: tls, address: '127.0.0.1:{}', server_name: localhost, ca: '{}'",
        addr.port(),
        p.ca_path.display()
    );
    let (o, why, facts) = probe(&format!("{{{tls}, min_days: 30}}")).await;
    assert_eq!(o, Fail, "{why}");
    assert!(
        why.contains(
            "expires in 1 days, when chain certificate 1 (CN=Verdict Test Intermediate) does"
        ),
        "{why}"
    );
    assert!(facts["days_left"].as_i64().unwrap() >= 399, "{facts}");
    assert_eq!(facts["chain_expires_first"]["position"], 1);
    assert_eq!(facts["chain_expires_first"]["days_left"], 1);
    assert_eq!(
        facts["chain_expires_first"]["subject"],
        "CN=Verdict Test Intermediate"
    );
    let (o, why, _) = probe(&format!("{{{tls}, min_days: 1}}")).await;
    assert_eq!(o, Pass, "{why}");
    assert!(why.contains("chain certificate 1"), "{why}");
}

/// A dNSName SAN written `10.0.0.1` names no address: only an iPAddress SAN meets an address.
#[tokio::test]
async fn a_dns_name_spelling_an_address_does_not_meet_an_address_san() {
    use rcgen::SanType;
    let mut leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    leaf.subject_alt_names
        .push(SanType::DnsName("10.0.0.1".try_into().unwrap()));
    leaf.subject_alt_names
        .push(SanType::IpAddress("10.0.0.2".parse().unwrap()));
    leaf.not_after = rcgen::date_time_ymd(2035, 1, 1);
    let p = issue(leaf, None);
    let addr = https(&p).await;
    let tls = format!(
        "kind: tls, address: '127.0.0.1:{}', server_name: localhost, ca: '{}'",
        addr.port(),
        p.ca_path.display()
    );
    let (o, why, facts) = probe(&format!("{{{tls}, san: ['10.0.0.1']}}")).await;
    assert_eq!(o, Fail, "{why}");
    assert!(why.contains("lacks the address 10.0.0.1"), "{why}");
    assert_eq!(
        facts["san"],
        serde_json::json!(["localhost", "dns:10.0.0.1", "10.0.0.2"])
    );
    let (o, why, _) = probe(&format!("{{{tls}, san: [LOCALHOST., '10.0.0.2']}}")).await;
    assert_eq!(o, Pass, "{why}");
}

#[tokio::test]
async fn an_expired_certificate_fails() {
    let p = pki(&["localhost"], (2021, 1, 1));
    let addr = https(&p).await;
    let (o, why, facts) = probe(&format!(
        "{{kind: tls, address: '127.0.0.1:{}', server_name: localhost, ca: '{}'}}",
        addr.port(),
        p.ca_path.display()
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    assert!(facts["days_left"].as_i64().unwrap() < 0);

    // `insecure: true` waives trust, not dates: the expired certificate still fails, and the
    // reason never reads as a verified chain.
    let (o, why, facts) = probe(&format!(
        "{{kind: tls, address: '127.0.0.1:{}', server_name: localhost, insecure: true}}",
        addr.port()
    ))
    .await;
    assert_eq!(o, Fail, "{why}");
    assert!(why.contains("expired") && why.contains("days ago"), "{why}");
    assert_eq!(facts["verified"], false);
}

/// With `insecure: true` a passing reason says the chain was not verified: only the facts
/// said so, and the reason read "certificate chain valid".
#[tokio::test]
async fn an_insecure_pass_says_the_chain_was_not_verified() {
    let p = pki(&["localhost"], (2035, 1, 1));
    let addr = https(&p).await;
    let (o, why, _) = probe(&format!(
        "{{kind: tls, address: '127.0.0.1:{}', server_name: localhost, insecure: true}}",
        addr.port()
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    assert!(why.contains("not verified (insecure: true)"), "{why}");
    assert!(!why.contains("valid for"), "{why}");
}

/// A log's "current" link whose file the agent creates during the run: no file when the run
/// began, so every line of it is new.
#[tokio::test]
async fn a_log_link_to_a_file_not_yet_created_counts_every_line_as_new() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("app-1.log");
    let link = dir.path().join("current.log");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (l, f) = (link.display(), target.display());
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: ready\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: '^ready', count: {{min: 1}}, since_start: true}}\n"
    ));
    let r = run_during(&s, &format!("echo ready > '{f}'")).await;
    let c = result(&r, "ready");
    assert_eq!(c.outcome, Pass, "{}", c.reason);
}

/// A line half-written when the run began (`status: not `) and finished during it (`ready`):
/// read from the mark's byte offset, its tail matched `^ready` and passed. The mark is the start
/// of the line, so the whole line is judged.
#[tokio::test]
async fn a_line_half_written_at_the_start_is_judged_whole() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "boot\nstatus: not ").unwrap();
    let l = log.display();
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: file-ready\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: '^ready', count: {{min: 1}}, since_start: true}}\n  - id: command-ready\n    mode: assert\n    probe: {{kind: log, command: [cat, '{l}'], matches: '^ready', count: {{min: 1}}, since_start: true}}\n  - id: the-line\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: '^status: not ready$', count: {{min: 1, max: 1}}, since_start: true}}\n"
    ));
    let r = run_during(&s, &format!("printf 'ready\\n' >> '{l}'")).await;
    for id in ["file-ready", "command-ready"] {
        let c = result(&r, id);
        assert_eq!(c.outcome, Fail, "{id}: {}", c.reason);
    }
    let c = result(&r, "the-line");
    assert_eq!(c.outcome, Pass, "{}", c.reason);
}

#[tokio::test]
async fn logs_count_only_lines_written_since_the_run_began() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "ERROR old failure\nINFO started\n").unwrap();
    let l = log.display();
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: new-errors\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: '^ERROR', count: {{max: 0}}, since_start: true}}\n  - id: all-errors\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: '^ERROR', count: {{min: 2, max: 2}}}}\n  - id: new-from-command\n    mode: assert\n    probe: {{kind: log, command: [cat, '{l}'], matches: '^ERROR', count: {{min: 1, max: 1}}, since_start: true}}\n"
    ));
    // The agent writes one new error line while the run is on.
    let r = run_during(&s, &format!("echo 'ERROR new failure' >> '{l}'")).await;
    let new = result(&r, "new-errors");
    assert_eq!(new.outcome, Fail, "{}", new.reason);
    assert!(new.reason.contains("1 lines match"), "{}", new.reason);
    assert!(new.reason.contains("since the run began"), "{}", new.reason);
    assert_eq!(
        result(&r, "all-errors").outcome,
        Pass,
        "{}",
        result(&r, "all-errors").reason
    );
    assert_eq!(
        result(&r, "new-from-command").outcome,
        Pass,
        "{}",
        result(&r, "new-from-command").reason
    );

    // Nothing new since the start: the old error does not count.
    let quiet = run(&s).await;
    assert_eq!(
        result(&quiet, "new-errors").outcome,
        Pass,
        "{}",
        result(&quiet, "new-errors").reason
    );
}

#[tokio::test]
async fn a_replaced_log_is_counted_whole_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "ERROR old\n").unwrap();
    let l = log.display();
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: errors\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: ERROR, count: {{max: 0}}, since_start: true}}\n"
    ));
    let r = run_during(&s, &format!("rm '{l}' && echo 'ERROR rotated' > '{l}'")).await;
    let e = result(&r, "errors");
    assert_eq!(e.outcome, Fail);
    assert!(e.reason.contains("replaced"), "{}", e.reason);
}

/// `unreachable: fail` turns "could not reach the system" into a failure for the probes that
/// reach over the network, and nothing else: other errors stay errors, and the default stays
/// `error`.
#[tokio::test]
async fn unreachable_is_an_error_unless_the_probe_says_fail() {
    let port = closed_port().await;
    let url = format!("http://127.0.0.1:{port}/");
    for (kind, def) in [
        ("http", format!("{{kind: http, url: '{url}'")),
        ("json", format!("{{kind: json, source: {{url: '{url}'}}")),
        ("tls", format!("{{kind: tls, address: '127.0.0.1:{port}'")),
    ] {
        let (outcome, reason, _) = probe(&format!("{def}}}")).await;
        assert_eq!(outcome, Error, "{kind} default: {reason}");
        let (outcome, reason, _) = probe(&format!("{def}, unreachable: error}}")).await;
        assert_eq!(outcome, Error, "{kind} error: {reason}");
        let (outcome, reason, _) = probe(&format!("{def}, unreachable: fail}}")).await;
        assert_eq!(outcome, Fail, "{kind} fail: {reason}");
        assert!(
            reason.starts_with("unreachable (counted as a failure)"),
            "{kind}: {reason}"
        );
    }
    // A system that answers, but not in a way the probe can judge, is still an error.
    let h = Http::start().await;
    h.script("text", vec![step(200, "not json")]);
    let (outcome, reason, _) = probe(&format!(
        "{{kind: http, url: '{}', expect: 'self.ok == true', unreachable: fail}}",
        h.url("/s/text")
    ))
    .await;
    assert_eq!(outcome, Error, "{reason}");
}

#[test]
fn unreachable_keeps_old_digests_and_applies_only_where_it_means_something() {
    let digest = |extra: &str| {
        let s = spec(&format!(
            "version: 1\ncriteria:\n  - id: p\n    probe: {{kind: http, url: 'http://127.0.0.1:1/'{extra}}}\n"
        ));
        s.checks[0].definition_digest.clone()
    };
    assert_eq!(digest(""), digest(", unreachable: error"));
    assert_ne!(digest(""), digest(", unreachable: fail"));
    let p = crate::common::problem(
        "version: 1\ncriteria:\n  - id: p\n    probe: {kind: json, source: {file: /nonexistent}, unreachable: fail}\n",
    );
    assert_eq!(p.pointer, "/criteria/0/probe/unreachable", "{p}");
    let p = crate::common::problem(
        "version: 1\ncriteria:\n  - id: p\n    probe: {kind: file, path: /etc, unreachable: fail}\n",
    );
    assert!(p.message.contains("unknown field `unreachable`"), "{p}");
}

#[tokio::test]
async fn a_command_gets_the_allowlisted_environment_and_what_the_spec_sets_only() {
    // Cargo sets CARGO_MANIFEST_DIR for this process; a probe must not inherit it.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let (o, why, _) = probe(
        "{kind: command, argv: [sh, -c, 'env; test -z \"$CARGO_MANIFEST_DIR\" && test -n \"$PATH\" && test \"$FROM_SPEC\" = yes'], env: {FROM_SPEC: 'yes'}}",
    )
    .await;
    assert_eq!(o, Pass, "{why}");
    for name in ["VERDICT_TOKEN", "DATABASE_URL", "PGPASSWORD"] {
        let (o, why, _) = probe(&format!(
            "{{kind: command, argv: [sh, -c, 'exit 0'], env: {{{name}: 'x'}}}}"
        ))
        .await;
        assert_eq!(o, Error, "{name}: {why}");
        assert!(why.contains(name) && why.contains("never given"), "{why}");
    }
    // A name holding `=` would set the variable before it (`DATABASE_URL` to `x=y`).
    let (o, why, _) = probe(
        "{kind: command, argv: [sh, -c, 'test -z \"$DATABASE_URL\"'], env: {'DATABASE_URL=postgres://attacker@evil/db?x': 'y'}}",
    )
    .await;
    assert_eq!(o, Error, "{why}");
    assert!(why.contains("holds '='"), "{why}");
}

/// Header names ignore case: `Authorization` and `authorization` (written so, or made so by a
/// variable) would send one of the two while the definition lists both.
#[test]
fn a_header_named_twice_in_another_case_is_refused() {
    for (headers, vars) in [
        ("{Authorization: 'Bearer ci', authorization: '1'}", ""),
        (
            "{Authorization: 'Bearer ci', '{{h}}': '1'}",
            "vars: {h: AUTHORIZATION}\n",
        ),
    ] {
        let p = crate::common::problem(&format!(
            "version: 1\n{vars}criteria:\n  - id: h\n    mode: assert\n    probe: {{kind: http, url: 'http://127.0.0.1:9/', headers: {headers}}}\n"
        ));
        assert!(
            p.message
                .contains("is given twice (header names ignore case)"),
            "{p}"
        );
    }
}

/// Documents that name a key twice, each with a reading by its last key that would pass.
const TWICE: &str = r#"{"ok": false, "ok": true}"#;
const TWICE_DEEP: &str =
    r#"{"items": [{"bad": true, "meta": {"n": 1, "n": 2}}], "items": [{"bad": false}]}"#;

#[tokio::test]
async fn observed_json_naming_a_key_twice_is_an_error_for_every_probe() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, doc: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, doc).unwrap();
        p.display().to_string()
    };
    let (twice, deep, once) = (
        file("twice.json", TWICE),
        file("deep.json", TWICE_DEEP),
        file("once.json", r#"{"ok": true, "items": [{"bad": false}]}"#),
    );
    let h = Http::start().await;
    h.script("twice", vec![step(200, TWICE)]);
    h.script("deep", vec![step(200, TWICE_DEEP)]);
    h.script(
        "once",
        vec![step(200, r#"{"ok": true, "items": [{"bad": false}]}"#)],
    );
    let items = "select: '$.items[*]', expect: 'self.bad == false', quantifier: all";
    // Each probe kind that reads JSON, by what it names in its reason, over a source: `{f}`
    // is the file and `{u}` the URL serving the same document.
    let kinds = [
        (
            "stdout",
            "{kind: command, argv: [cat, '{f}'], expect: 'self.ok == true'}".to_owned(),
        ),
        (
            "body",
            "{kind: http, url: '{u}', expect: 'self.ok == true'}".to_owned(),
        ),
        (
            "source",
            format!("{{kind: json, source: {{file: '{{f}}'}}, {items}}}"),
        ),
        (
            "source",
            format!("{{kind: json, source: {{command: [cat, '{{f}}']}}, {items}}}"),
        ),
        (
            "source",
            format!("{{kind: json, source: {{url: '{{u}}'}}, {items}}}"),
        ),
    ];
    for (what, def) in &kinds {
        let at = |f: &str, name: &str| def.replace("{f}", f).replace("{u}", &h.url(name));
        // Read once, the document passes: the probe can pass.
        let (o, why, _) = probe(&at(&once, "/s/once")).await;
        assert_eq!(o, Pass, "{what}: {why}");
        let (o, why, _) = probe(&at(&twice, "/s/twice")).await;
        assert_eq!(o, Error, "{what}: {why}");
        assert!(
            why.starts_with(&format!(
                "{what} is not strict JSON: key \"ok\" named twice at \"/ok\" (line 1 column "
            )),
            "{what}: {why}"
        );
        let (o, why, _) = probe(&at(&deep, "/s/deep")).await;
        assert_eq!(o, Error, "{what}: {why}");
        assert!(
            why.starts_with(&format!(
                "{what} is not strict JSON: key \"n\" named twice at \"/items/0/meta/n\""
            )),
            "{what}: {why}"
        );
    }
    // Integers beyond ±(2^53-1) are refused as in every other input verdict reads.
    let big = file("big.json", r#"{"n": 9007199254740993}"#);
    let (o, why, _) = probe(&format!(
        "{{kind: command, argv: [cat, '{big}'], expect: 'self.n > 0'}}"
    ))
    .await;
    assert_eq!(o, Error, "{why}");
    assert!(
        why.contains("not strict JSON: integer 9007199254740993"),
        "{why}"
    );
}

#[tokio::test]
async fn a_snapshot_of_json_naming_a_key_twice_is_an_error_and_text_stays_text() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, doc: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, doc).unwrap();
        p.display().to_string()
    };
    let (twice, text) = (file("twice.json", TWICE_DEEP), file("text", "not json\n"));
    let h = Http::start().await;
    h.script("twice", vec![step(200, TWICE_DEEP)]);
    h.script("text", vec![step(200, "not json")]);
    let unchanged = |probe: String| {
        spec(&format!(
            "version: 1\ncriteria:\n  - id: u\n    mode: unchanged\n    probe: {probe}\n"
        ))
    };
    let stopper = verdict_probes::runner::Stopper::new();
    for (what, twice, text) in [
        (
            "stdout",
            format!("{{kind: command, argv: [cat, '{twice}']}}"),
            format!("{{kind: command, argv: [cat, '{text}']}}"),
        ),
        (
            "body",
            format!("{{kind: http, url: '{}'}}", h.url("/s/twice")),
            format!("{{kind: http, url: '{}'}}", h.url("/s/text")),
        ),
        (
            "source",
            format!("{{kind: json, source: {{file: '{twice}'}}}}"),
            String::new(),
        ),
    ] {
        let failures = verdict_probes::runner::take_baseline(&unchanged(twice), 1, &stopper)
            .await
            .unwrap_err();
        assert_eq!(failures[0].0, "u");
        assert!(
            failures[0]
                .1
                .contains(&format!("{what} is not strict JSON: key \"n\" named twice")),
            "{what}: {failures:?}"
        );
        if !text.is_empty() {
            let b = verdict_probes::runner::take_baseline(&unchanged(text), 1, &stopper)
                .await
                .unwrap();
            assert_eq!(b.criteria.len(), 1, "{what}");
        }
    }
}

/// A producer's test suite backgrounds a child and exits 0; the child would rewrite files
/// after verdict wrote its evidence. The program's whole process group dies when it exits.
#[tokio::test]
async fn a_program_that_exits_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("rewritten");
    let (o, why, _) = probe(&format!(
        "{{kind: command, shell: \"(sleep 1; touch '{}') >/dev/null 2>&1 & exit 0\"}}",
        marker.display()
    ))
    .await;
    assert_eq!(o, Pass, "{why}");
    tokio::time::sleep(std::time::Duration::from_millis(1800)).await;
    assert!(!marker.exists(), "a child of the probe outlived it");
}

/// A rotated log loses the start position: every line is counted then, so a "ready" line
/// written before the run would meet `min: 1`. A minimum the whole log meets proves nothing.
#[tokio::test]
async fn a_lost_log_position_cannot_prove_a_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "server ready\n").unwrap();
    let l = log.display();
    let s = spec(&format!(
        "version: 1\ncriteria:
  - id: file-ready\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: ready, count: {{min: 1}}, since_start: true}}
  - id: command-ready\n    mode: assert\n    probe: {{kind: log, command: [cat, '{l}'], matches: ready, count: {{min: 1}}, since_start: true}}
  - id: file-twice\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: ready, count: {{min: 2}}, since_start: true}}
  - id: file-none\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: ready, count: {{max: 0}}, since_start: true}}\n"
    ));
    // The agent rotates the log and puts the old line back, writing nothing new.
    let r = run_during(
        &s,
        &format!("mv '{l}' '{l}.1' && printf 'rotated\\nserver ready\\n' > '{l}'"),
    )
    .await;
    for id in ["file-ready", "command-ready"] {
        let c = result(&r, id);
        assert_eq!(c.outcome, Error, "{id}: {}", c.reason);
        assert!(c.reason.contains("cannot be proven"), "{}", c.reason);
    }
    // A minimum the whole log misses is missed by the new lines too; a maximum is still
    // judged on every line.
    assert_eq!(result(&r, "file-twice").outcome, Fail);
    assert_eq!(result(&r, "file-none").outcome, Fail);
}

/// A FIFO (or a device) at a path a probe reads blocked the open forever: past the probe's
/// timeout, the run's deadline and Ctrl-C. Only regular files are read.
#[tokio::test]
async fn a_fifo_where_a_file_is_read_is_an_error_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let f = fifo.display();
    let s = spec(&format!(
        "version: 1\ncriteria:
  - id: file\n    mode: assert\n    probe: {{kind: file, path: '{f}', content: {{contains: x}}}}
  - id: json\n    mode: assert\n    probe: {{kind: json, source: {{file: '{f}'}}}}
  - id: log\n    mode: assert\n    probe: {{kind: log, file: '{f}', matches: x}}
  - id: log-since\n    mode: assert\n    probe: {{kind: log, file: '{f}', matches: x, since_start: true}}\n"
    ));
    let r = tokio::time::timeout(std::time::Duration::from_secs(5), run(&s))
        .await
        .expect("a FIFO held the run");
    for id in ["json", "log", "log-since"] {
        let c = result(&r, id);
        assert_eq!(c.outcome, Error, "{id}: {}", c.reason);
        assert!(
            c.reason.contains("is a FIFO, not a regular file"),
            "{id}: {}",
            c.reason
        );
    }
    // The file probe sees the type first: content of something that is no file fails.
    let c = result(&r, "file");
    assert_ne!(c.outcome, Pass, "{}", c.reason);
}

/// A document and an expression whose evaluation takes far longer than the probe's timeout
/// (a nested all/exists over a long list) passed once evaluated, the timeout ignored.
#[tokio::test]
async fn an_evaluation_past_the_probe_timeout_is_an_error() {
    let items: Vec<serde_json::Value> = (0..900).map(|i| serde_json::json!({"id": i})).collect();
    let doc = serde_json::json!({ "items": items }).to_string();
    let started = std::time::Instant::now();
    let (o, why) = json_probe(
        &doc,
        "timeout: 300ms, expect: \"self.items.all(a, self.items.exists(b, b.id == a.id))\"",
    )
    .await;
    assert_eq!(o, Error, "{why}");
    assert!(why.contains("timed out after 300ms"), "{why}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

/// `{count: {max: 0}}` with one object satisfying the expectation and another erroring:
/// the maximum is already exceeded, whatever the error hides.
#[tokio::test]
async fn a_count_already_out_of_bounds_fails_despite_errors() {
    let doc = r#"{"items": [{"bad": true}, {"other": 1}]}"#;
    let (o, why) = json_probe(
        doc,
        "select: '$.items[*]', expect: 'self.bad', quantifier: {count: {max: 0}}",
    )
    .await;
    assert_eq!(o, Fail, "{why}");
    let (o, why) = json_probe(
        r#"{"items": [{"bad": false}, {"other": 1}]}"#,
        "select: '$.items[*]', expect: 'self.bad', quantifier: {count: {min: 3}}",
    )
    .await;
    assert_eq!(o, Fail, "{why}");
    // Undecided: the error could be the one match a minimum of 2 needs.
    let (o, why) = json_probe(
        doc,
        "select: '$.items[*]', expect: 'self.bad', quantifier: {count: {min: 2}}",
    )
    .await;
    assert_eq!(o, Error, "{why}");
}

/// The producer replaces the file a check reads with a symlink to the runner's secret, out of
/// the directory: its bytes must not land in the report.
/// The producer hard-links the runner's token to the file a probe reads: no path walk tells
/// the link from the token, so a file with more than one link is never excerpted.
#[tokio::test]
async fn a_hard_link_to_a_file_outside_is_not_excerpted() {
    let root = tempfile::tempdir().unwrap();
    let secret = root.path().join("runner-token");
    std::fs::write(&secret, "TOKEN-abc123\n").unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let link = work.join("report.txt");
    std::fs::hard_link(&secret, &link).unwrap();
    let s = spec(&format!(
        "version: 1\ncriteria:
  - id: read\n    mode: assert\n    probe: {{kind: file, path: '{l}', content: {{not_matches: 'TOKEN-\\w+'}}}}
  - id: json\n    mode: assert\n    probe: {{kind: json, source: {{file: '{l}'}}}}
  - id: log\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: TOKEN}}\n",
        l = link.display()
    ));
    let r = run(&s).await;
    let text = serde_json::to_string(&r).unwrap();
    assert!(
        !text.contains("abc123"),
        "the secret reached the report: {text}"
    );
    let read = result(&r, "read");
    assert_eq!(read.outcome, Fail, "{}", read.reason);
    let out = read.observations[0].output.as_ref().unwrap();
    assert!(out.excerpt.contains("hard links"), "{}", out.excerpt);
    assert_eq!(result(&r, "log").outcome, Pass);
}

#[tokio::test]
async fn a_file_reached_through_a_symlink_out_of_its_directory_is_not_excerpted() {
    let root = tempfile::tempdir().unwrap();
    let secret = root.path().join("runner-token");
    std::fs::write(&secret, "TOKEN-abc123\n").unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let link = work.join("result.txt");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let s = spec(&format!(
        "version: 1\ncriteria:
  - id: read\n    mode: assert\n    probe: {{kind: file, path: '{l}', content: {{not_matches: 'TOKEN-\\w+'}}}}
  - id: json\n    mode: assert\n    probe: {{kind: json, source: {{file: '{l}'}}}}
  - id: log\n    mode: assert\n    probe: {{kind: log, file: '{l}', matches: TOKEN}}\n",
        l = link.display()
    ));
    let r = run(&s).await;
    let text = serde_json::to_string(&r).unwrap();
    assert!(
        !text.contains("abc123"),
        "the secret reached the report: {text}"
    );
    let read = result(&r, "read");
    assert_eq!(read.outcome, Fail, "{}", read.reason);
    let out = read.observations[0].output.as_ref().unwrap();
    assert!(out.excerpt.contains("no excerpt kept"), "{}", out.excerpt);
    assert!(out.excerpt.contains("outside"), "{}", out.excerpt);
    assert_eq!(result(&r, "log").outcome, Pass);

    // A link within its directory is shown as before.
    std::fs::write(work.join("real.txt"), "visible\n").unwrap();
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("real.txt", &link).unwrap();
    let (o, _, _) = probe(&format!(
        "{{kind: file, path: '{}', content: {{contains: visible}}}}",
        link.display()
    ))
    .await;
    assert_eq!(o, Pass);
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: near\n    mode: assert\n    probe: {{kind: file, path: '{}', content: {{contains: visible}}}}\n",
        link.display()
    ));
    let r = run(&s).await;
    let out = result(&r, "near").observations[0].output.clone().unwrap();
    assert_eq!(out.excerpt, "visible\n");
}

/// An observed number too small for a double (`1e-400`) read as 0.0 and met `self.x == 0.0`.
#[tokio::test]
async fn an_observed_number_that_underflows_is_an_error_not_zero() {
    let (o, why) = json_probe("{\"x\": 1e-400}", "expect: \"self.x == 0.0\"").await;
    assert_eq!(o, Error, "{why}");
    assert!(why.contains("too small for a double"), "{why}");
}
