//! The review pages under `/ui` in a real browser (headless Chromium over WebDriver), against
//! the server `verdict serve` runs, on loopback, over a store seeded through the engine. A
//! test binary of its own, so the API's integration tests never need a browser: without one
//! (or without axe-core) each test here says `skipped: ...` and passes, unless
//! `VERDICT_REQUIRE_BROWSER` is set, as CI sets it (see `harness`).
//!
//! What a person relies on: signing in, the queue oldest first, a decision that moves the
//! outcome, and refusals that show why and write nothing but their denial (the producer
//! deciding on her own work, a subject that moved while the page was open, a post without the
//! CSRF token). Every page is also screenshotted, checked for sideways scrolling at a laptop's
//! and a phone's width, run through axe-core, and held to the server's own origin.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod harness;
mod seed;

use fantoccini::Locator;
use harness::{Browser, WIDTHS};
use seed::{APPROVE, CSRF, HANA, MOVED, QUEUE, REJECT, STALE, World};
use std::sync::Arc;
use verdict_store::Store;

/// Runs `$body(&mut browser, store)` on a fresh SQLite store, then on a fresh PostgreSQL
/// database, in one browser.
macro_rules! on_both {
    ($test:literal, $body:ident) => {{
        let Some(mut browser) = Browser::start($test).await else {
            return;
        };
        {
            let (store, _dir) = seed::sqlite().await;
            $body(&mut browser, store.clone()).await;
            assert!(store.verify_audit(None).await.unwrap().is_intact());
        }
        {
            let (store, _scratch) = seed::postgres().await;
            $body(&mut browser, store.clone()).await;
            assert!(store.verify_audit(None).await.unwrap().is_intact());
        }
        browser.close().await;
    }};
}

/// Seeds `store`, starts the server over it and points the browser at it, signed out.
async fn setup(b: &mut Browser, store: Arc<dyn Store>) -> (World, seed::Server) {
    let world = seed::seed(store).await;
    let server = seed::serve(world.engine.clone()).await;
    b.reset(&server.origin).await;
    (world, server)
}

/// Signs in with `token` through the sign-in form.
async fn sign_in(b: &Browser, token: &str) {
    b.goto("/ui/sign-in").await;
    let input = b.one("form#sign-in input#token").await;
    assert_eq!(
        input.attr("type").await.unwrap().as_deref(),
        Some("password"),
        "the token field must not show the token"
    );
    input.send_keys(token).await.unwrap();
    b.click_and_wait("form#sign-in button").await;
}

/// Signs in as a seeded principal and expects to land on the queue.
async fn sign_in_as(b: &Browser, w: &World, name: &str) {
    sign_in(b, w.token(name)).await;
    assert_eq!(b.path().await, "/ui/queue", "signed in as {name}");
}

/// Chooses `verdict`, writes `reason` and submits the decision form.
async fn decide(b: &Browser, verdict: &str, reason: &str) {
    b.one(&format!(
        "form#decide input#verdict-{verdict}[type=radio][name=verdict]"
    ))
    .await
    .click()
    .await
    .unwrap();
    b.one("form#decide textarea#reason")
        .await
        .send_keys(reason)
        .await
        .unwrap();
    b.click_and_wait("form#decide button#decide-submit").await;
}

/// Posts a decision from the page shown as its own form would, for a page that offers none:
/// the session's CSRF token taken from the sign-out form, the digests of what is current.
async fn decide_anyway(b: &Browser, w: &World, execution: &str, verdict: &str, reason: &str) {
    let reviewed = w.reviewed(execution).await;
    let made = b
        .client
        .execute(
            "const [action, subject, policy, verdict, reason] = arguments;
             const token = document.querySelector('form#sign-out input[name=csrf]');
             if (token === null) return false;
             const f = document.createElement('form');
             f.method = 'post';
             f.action = action;
             const fields = {csrf: token.value, subject_digest: subject, policy_digest: policy, verdict, reason};
             for (const [name, value] of Object.entries(fields)) {
               const i = document.createElement('input');
               i.type = 'hidden'; i.name = name; i.value = value;
               f.appendChild(i);
             }
             document.body.appendChild(f);
             window.__verdictOldPage = true;
             f.submit();
             return true;",
            vec![
                format!("/ui/executions/{execution}/decision").into(),
                reviewed.subject_digest.as_str().into(),
                reviewed.policy_digest.as_str().into(),
                verdict.into(),
                reason.into(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        made, true,
        "the page has no sign-out form with a CSRF token"
    );
    b.wait_for_new_page().await;
}

/// Asserts the page shown is a refusal with `status` and an alert, and returns the alert's
/// text.
async fn assert_refused(b: &Browser, status: u16, what: &str) -> String {
    assert_eq!(b.status().await, status, "{what}: the refusal's status");
    let alert = b.text("div#error[role=alert]").await;
    assert!(!alert.is_empty(), "{what}: the alert says nothing");
    assert!(
        b.all("p#notice").await.is_empty(),
        "{what}: a refusal also shows a success notice"
    );
    alert
}

// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_lands_on_the_queue_oldest_first_with_an_http_only_cookie() {
    on_both!(
        "signing_in_lands_on_the_queue_oldest_first_with_an_http_only_cookie",
        signing_in
    );
}

async fn signing_in(b: &mut Browser, store: Arc<dyn Store>) {
    let (w, _server) = setup(b, store).await;

    // A token no principal holds: an alert, no session, still on the sign-in page.
    sign_in(b, "vdt_not-a-token-anyone-holds").await;
    let alert = b.text("div#error[role=alert]").await;
    assert!(!alert.is_empty(), "a bad token's alert says nothing");
    assert!(
        b.client.get_named_cookie("verdict_session").await.is_err(),
        "a bad token got a session"
    );
    assert!(
        b.path().await.starts_with("/ui/sign-in"),
        "{}",
        b.path().await
    );

    // The reviewer's token: the queue, and a session cookie scripts cannot read.
    sign_in_as(b, &w, "reviewer").await;
    let cookie = b.client.get_named_cookie("verdict_session").await.unwrap();
    assert_eq!(cookie.http_only(), Some(true), "{cookie:?}");
    assert_eq!(
        cookie.same_site().map(|s| s.to_string()).as_deref(),
        Some("Strict"),
        "{cookie:?}"
    );
    assert_eq!(cookie.path(), Some("/ui"), "{cookie:?}");
    assert!(!cookie.value().is_empty());
    let visible = b.js("return document.cookie;").await;
    assert!(
        !visible.as_str().unwrap().contains("verdict_session"),
        "document.cookie shows the session: {visible}"
    );

    // Every execution waiting for a person, oldest first, each linking to its page.
    let rows = b.all("table#queue tr[data-execution]").await;
    let mut listed = Vec::new();
    for row in &rows {
        let id = row.attr("data-execution").await.unwrap().unwrap();
        let link = row
            .find(Locator::Css(&format!("a[href$='/ui/executions/{id}']")))
            .await
            .unwrap_or_else(|_| panic!("queue row {id} has no link to its page"));
        let href = link.prop("href").await.unwrap().unwrap();
        assert_eq!(href, format!("{}/ui/executions/{id}", b.origin));
        listed.push(id);
    }
    assert_eq!(listed, QUEUE, "the queue, oldest first");
    assert!(b.all("p#queue-empty").await.is_empty());

    // Opening the oldest.
    b.click_and_wait(&format!("tr[data-execution='{APPROVE}'] a"))
        .await;
    assert_eq!(b.path().await, format!("/ui/executions/{APPROVE}"));
    assert_eq!(b.text("span#outcome").await, "human_required");
    for section in [
        "subject",
        "resources",
        "matrix",
        "reasons",
        "findings",
        "rework",
        "follow-ups",
        "evidence",
        "receipts",
        "history",
    ] {
        b.one(&format!("#{section}")).await;
    }
    let subject = w.subject_of(APPROVE).await;
    let form = b.one("form#decide").await;
    assert_eq!(
        form.attr("action").await.unwrap().as_deref(),
        Some(format!("/ui/executions/{APPROVE}/decision").as_str())
    );
    assert_eq!(
        form.attr("method")
            .await
            .unwrap()
            .map(|m| m.to_ascii_lowercase())
            .as_deref(),
        Some("post")
    );
    let hidden = |name: &'static str| {
        let b = &*b;
        async move {
            b.one(&format!("form#decide input[type=hidden][name={name}]"))
                .await
                .attr("value")
                .await
                .unwrap()
                .unwrap_or_default()
        }
    };
    assert_eq!(hidden("subject_digest").await, subject.as_str());
    assert_eq!(
        hidden("policy_digest").await,
        w.reviewed(APPROVE).await.policy_digest.as_str()
    );
    assert!(!hidden("csrf").await.is_empty(), "an empty CSRF token");

    // A person with no grant sees an empty queue.
    b.client.delete_all_cookies().await.unwrap();
    sign_in_as(b, &w, "idle").await;
    b.one("p#queue-empty").await;
    assert!(b.all("table#queue tr[data-execution]").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_approves_to_pass_and_rejects_to_rework() {
    on_both!(
        "a_reviewer_approves_to_pass_and_rejects_to_rework",
        approve_and_reject
    );
}

async fn approve_and_reject(b: &mut Browser, store: Arc<dyn Store>) {
    let (w, _server) = setup(b, store).await;
    sign_in_as(b, &w, "reviewer").await;

    for (execution, verdict, outcome) in
        [(APPROVE, "approve", "pass"), (REJECT, "reject", "rework")]
    {
        b.goto(&format!("/ui/executions/{execution}")).await;
        assert_eq!(b.text("span#outcome").await, "human_required");
        let reviewed = w.reviewed(execution).await;
        let reason = format!("read the diff of {execution} and its test log");
        decide(b, verdict, &reason).await;

        assert_eq!(b.status().await, 200, "{execution}: after the redirect");
        assert_eq!(b.path().await, format!("/ui/executions/{execution}"));
        assert!(!b.text("p#notice[role=status]").await.is_empty());
        assert!(b.all("div#error").await.is_empty(), "{execution}");
        assert_eq!(b.text("span#outcome").await, outcome, "{execution}");
        assert_eq!(
            w.outcome(execution).await,
            outcome,
            "{execution}: the engine"
        );

        // Stored as the reviewer, naming exactly what the page showed.
        let stored: Vec<_> = w
            .human_decisions()
            .await
            .into_iter()
            .filter(|d| d["subject_digest"] == reviewed.subject_digest.as_str())
            .collect();
        assert_eq!(stored.len(), 1, "{execution}: {stored:?}");
        let d = &stored[0];
        assert_eq!(d["principal"], "reviewer");
        assert_eq!(d["decision"], verdict);
        assert_eq!(d["reason"], reason.as_str());
        assert_eq!(d["policy_digest"], reviewed.policy_digest.as_str());
    }
    // Nothing else moved.
    for execution in [STALE, CSRF, HANA, MOVED] {
        assert_eq!(w.outcome(execution).await, "human_required", "{execution}");
    }
    assert_eq!(w.human_decisions().await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_decisions_show_why_and_write_nothing_but_their_denial() {
    on_both!(
        "refused_decisions_show_why_and_write_nothing_but_their_denial",
        refusals
    );
}

/// Asserts that since `seq` nothing but denials was written and no human decision exists.
async fn assert_nothing_but_denials(w: &World, seq: u64, what: &str) {
    let tables = w.tables_written_after(seq).await;
    assert!(
        tables.iter().all(|t| t == "denials"),
        "{what}: a refusal wrote {tables:?}"
    );
    assert!(
        w.human_decisions().await.is_empty(),
        "{what}: a human decision was stored"
    );
}

async fn refusals(b: &mut Browser, store: Arc<dyn Store>) {
    let (w, _server) = setup(b, store).await;

    // hana produced ex-hana: she is offered no decision, and one she makes anyway is refused.
    sign_in_as(b, &w, "hana").await;
    b.goto(&format!("/ui/executions/{HANA}")).await;
    assert_eq!(b.text("span#outcome").await, "human_required");
    assert!(
        b.all("form#decide").await.is_empty(),
        "the producer is offered a decision on her own work"
    );
    let seq = w.head_seq().await;
    decide_anyway(b, &w, HANA, "approve", "looks right to me").await;
    let alert = assert_refused(b, 403, "the producer approving her own work").await;
    assert!(
        alert.contains("self_verification_denied") || alert.contains("own work"),
        "the alert does not say why: {alert:?}"
    );
    assert_nothing_but_denials(&w, seq, "hana").await;
    assert!(
        w.tables_written_after(seq).await.len() == 1,
        "hana's refusal is not recorded as one denial"
    );
    assert_eq!(w.outcome(HANA).await, "human_required");
    b.goto(&format!("/ui/executions/{HANA}")).await;
    assert_eq!(b.text("span#outcome").await, "human_required");

    // The reviewer opens ex-stale; the producer puts a new subject while the page is open.
    b.client.delete_all_cookies().await.unwrap();
    sign_in_as(b, &w, "reviewer").await;
    b.goto(&format!("/ui/executions/{STALE}")).await;
    let old = w.subject_of(STALE).await;
    let new = w.move_subject(STALE, 2).await;
    assert_ne!(old, new);
    let before = w.outcome(STALE).await;
    let seq = w.head_seq().await;
    decide(b, "approve", "reviewed generation 1").await;
    let alert = assert_refused(b, 409, "a decision on a subject that moved").await;
    let short = &new.as_str()["sha256:".len().."sha256:".len() + 12];
    assert!(
        alert.to_lowercase().contains("subject") && alert.contains(short),
        "the alert does not name the move to {new}: {alert:?}"
    );
    assert_nothing_but_denials(&w, seq, "stale").await;
    assert_eq!(w.outcome(STALE).await, before);

    // The CSRF token removed from the form before it is sent.
    b.goto(&format!("/ui/executions/{CSRF}")).await;
    let removed = b
        .js(
            "const t = document.querySelector('form#decide input[name=csrf]');
             if (t === null) return false; t.remove(); return true;",
        )
        .await;
    assert_eq!(removed, true, "the form has no CSRF input to remove");
    let seq = w.head_seq().await;
    decide(b, "approve", "sent without the token").await;
    assert_refused(b, 403, "a form without its CSRF token").await;
    assert_nothing_but_denials(&w, seq, "form without csrf").await;
    assert_eq!(w.outcome(CSRF).await, "human_required");

    // The same post made outside the page, with the session cookie and no token, or another
    // session's token.
    b.goto(&format!("/ui/executions/{CSRF}")).await;
    let session = b.client.get_named_cookie("verdict_session").await.unwrap();
    let reviewed = w.reviewed(CSRF).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for csrf in [None, Some("not-the-token")] {
        let mut form = vec![
            ("subject_digest", reviewed.subject_digest.as_str()),
            ("policy_digest", reviewed.policy_digest.as_str()),
            ("verdict", "approve"),
            ("reason", "posted around the page"),
        ];
        if let Some(t) = csrf {
            form.push(("csrf", t));
        }
        let seq = w.head_seq().await;
        let r = client
            .post(format!("{}/ui/executions/{CSRF}/decision", b.origin))
            .header("cookie", format!("verdict_session={}", session.value()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(&form))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "csrf {csrf:?}");
        assert_nothing_but_denials(&w, seq, "raw post without the token").await;
    }
    assert_eq!(w.outcome(CSRF).await, "human_required");
}

/// `application/x-www-form-urlencoded` of `pairs`.
fn form_body(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|c| match c {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                    char::from(c).to_string()
                }
                b' ' => "+".to_owned(),
                _ => format!("%{c:02X}"),
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_is_usable_at_two_widths_accessible_and_self_contained() {
    let test = "every_page_is_usable_at_two_widths_accessible_and_self_contained";
    let Some(mut b) = Browser::start(test).await else {
        return;
    };
    let (store, _dir) = seed::sqlite().await;
    let (w, _server) = setup(&mut b, store).await;
    let mut problems = Vec::new();

    b.goto("/ui/sign-in").await;
    check_page(&b, "sign-in", false, false, &mut problems).await;

    sign_in_as(&b, &w, "reviewer").await;
    let pages = [
        ("queue", "/ui/queue".to_owned(), "table#queue"),
        ("board", "/ui/board".to_owned(), "table#board"),
        ("subject", format!("/ui/executions/{MOVED}"), "span#outcome"),
        (
            "lineage",
            format!("/ui/executions/{MOVED}/lineage"),
            "section#lineage",
        ),
    ];
    for (name, path, marker) in &pages {
        b.goto(path).await;
        b.one(marker).await;
        check_page(&b, name, *name == "subject", true, &mut problems).await;
    }
    // The lineage shows what was raised on the first subject and what the second resolved,
    // with the evidence the resolving result cites.
    b.goto(&format!("/ui/executions/{MOVED}/lineage")).await;
    let blocker = b.text("article[data-finding=\"f-retry-loop\"]").await;
    for word in ["blocker", "change", "resolved", "ev-"] {
        assert!(
            blocker.contains(word),
            "the blocker's lineage does not show {word:?}: {blocker}"
        );
    }

    // The subject's diff is drawn as its bytes are: by its hunk's counts the lines that look
    // like file headers are a removed and an added line, the carriage return and the
    // bidirectional controls are marked escapes named for screen readers, no such character
    // reaches the page, and the lines are laid out in the order of their bytes.
    b.goto(&format!("/ui/executions/{MOVED}")).await;
    let drawn = b
        .js(
            "const t = document.querySelector('article.resource table.diff');
             const rows = [...t.querySelectorAll('tbody tr')];
             const esc = [...t.querySelectorAll('span.esc')];
             return {
               html: t.outerHTML,
               rows: rows.map(r => [r.className, r.querySelector('pre').textContent]),
               names: esc.map(e => e.getAttribute('aria-label')),
               bidi: getComputedStyle(t.querySelector('pre')).unicodeBidi,
               direction: getComputedStyle(t.querySelector('pre')).direction,
             };",
        )
        .await;
    let html = drawn["html"].as_str().unwrap();
    for c in ['\u{202E}', '\u{2066}', '\u{2069}', '\r'] {
        assert!(!html.contains(c), "{c:?} drawn as itself: {html}");
    }
    let rows: Vec<(String, String)> = serde_json::from_value(drawn["rows"].clone()).unwrap();
    for (class, text) in [
        ("d-del", "--- a/src/retry.rs"),
        ("d-add", "+++ b/evil"),
        (
            "d-add",
            "+    return true; // <U+000D>retry up to three times",
        ),
        (
            "d-add",
            "+let user = \"admin<U+202E> <U+2066>// not admin<U+2069> <U+2066>\";",
        ),
    ] {
        assert!(
            rows.contains(&(class.to_owned(), text.to_owned())),
            "no {class} row {text:?} in {rows:?}"
        );
    }
    assert_eq!(
        drawn["names"],
        serde_json::json!([
            "U+000D carriage return",
            "U+202E right-to-left override",
            "U+2066 left-to-right isolate",
            "U+2069 pop directional isolate",
            "U+2066 left-to-right isolate"
        ])
    );
    assert_eq!(
        (drawn["bidi"].as_str(), drawn["direction"].as_str()),
        (Some("bidi-override"), Some("ltr"))
    );

    // The refusal pages: a subject that moved while open (409), a form without its token.
    b.goto(&format!("/ui/executions/{STALE}")).await;
    w.move_subject(STALE, 2).await;
    decide(&b, "approve", "reviewed generation 1").await;
    assert_refused(&b, 409, "stale").await;
    check_page(&b, "refused-moved", false, true, &mut problems).await;
    b.goto(&format!("/ui/executions/{CSRF}")).await;
    b.js("document.querySelector('form#decide input[name=csrf]').remove(); return null;")
        .await;
    decide(&b, "approve", "sent without the token").await;
    assert_refused(&b, 403, "csrf").await;
    check_page(&b, "refused-csrf", false, true, &mut problems).await;
    // After a decision: the notice.
    b.goto(&format!("/ui/executions/{APPROVE}")).await;
    decide(&b, "approve", "read the diff and the test log").await;
    b.one("p#notice[role=status]").await;
    check_page(&b, "decided", false, true, &mut problems).await;

    // The producer refused on her own work.
    b.client.delete_all_cookies().await.unwrap();
    sign_in_as(&b, &w, "hana").await;
    b.goto(&format!("/ui/executions/{HANA}")).await;
    decide_anyway(&b, &w, HANA, "approve", "looks right to me").await;
    assert_refused(&b, 403, "hana").await;
    check_page(&b, "refused-producer", false, true, &mut problems).await;

    // An empty queue, and the operator's reliability page.
    b.client.delete_all_cookies().await.unwrap();
    sign_in_as(&b, &w, "idle").await;
    b.one("p#queue-empty").await;
    check_page(&b, "queue-empty", false, true, &mut problems).await;
    b.client.delete_all_cookies().await.unwrap();
    sign_in_as(&b, &w, "ops").await;
    b.goto("/ui/reliability").await;
    let charts = b.all("svg[role=img]").await.len() + b.all("p#reliability-empty").await.len();
    assert!(
        charts > 0,
        "/ui/reliability shows neither a chart nor its empty state"
    );
    check_page(&b, "reliability", false, true, &mut problems).await;

    harness::say(&format!("screenshots: {}", b.screenshots().display()));
    assert!(
        problems.is_empty(),
        "the pages have problems:\n{}",
        problems.join("\n")
    );
    b.close().await;
}

/// At each width: no sideways scrolling, the decide button clickable (`decide`), a
/// screenshot, and axe-core's serious or critical violations; once: the page's frame
/// (`signed_in`: header, nav, main, a sign-out form) and its origin. Problems are collected
/// so one run lists them all.
async fn check_page(
    b: &Browser,
    name: &str,
    decide: bool,
    signed_in: bool,
    problems: &mut Vec<String>,
) {
    let path = b.path().await;
    b.assert_only_the_servers_origin().await;
    let mut frame = vec!["main"];
    if signed_in {
        frame.extend(["header", "nav", "form[action*='sign-out']"]);
    }
    for css in frame {
        if b.all(css).await.is_empty() {
            problems.push(format!("{name} ({path}): no {css}"));
        }
    }
    for width in WIDTHS {
        if let Some(p) = b.resize_and_check_overflow(width).await {
            problems.push(format!("{name} ({path}) at {width} px: {p}"));
        }
        if decide && let Some(p) = b.not_clickable("button#decide-submit").await {
            problems.push(format!("{name} ({path}) at {width} px: {p}"));
        }
        b.screenshot(name, width).await;
        for v in b.axe_serious().await {
            problems.push(format!(
                "{name} ({path}) at {width} px: axe {} ({}): {}; at {}",
                v.id,
                v.impact.unwrap_or_default(),
                v.help,
                serde_json::to_string(&v.targets).unwrap()
            ));
        }
    }
    let [wide, _] = WIDTHS;
    b.client.set_window_size(wide, 900).await.unwrap();
}
