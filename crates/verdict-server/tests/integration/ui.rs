//! The review pages under `/ui` over real HTTP on loopback, each body on SQLite and on
//! PostgreSQL: sign-in (good, bad, wrong role) and its cookie, CSRF on every form (refused,
//! nothing written), the queue, the execution page, approving and rejecting through it, the
//! refusals a decision can meet (its producer, a subject that moved while the page was open,
//! an empty reason), escaping, a diff drawn as its bytes are, and the security headers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use verdict_core::contracts::Outcome;
use verdict_core::digest::Digest;
use verdict_server::AppState;
use verdict_store::{Access, ScopeKind};

/// A page as the browser got it.
#[derive(Debug)]
struct Page {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Page {
    fn location(&self) -> &str {
        self.headers
            .get("location")
            .map_or("", |v| v.to_str().unwrap())
    }

    fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    /// The value of the first hidden input named `name`.
    fn hidden(&self, name: &str) -> String {
        let marker = format!("name=\"{name}\" value=\"");
        let at = self
            .body
            .find(&marker)
            .unwrap_or_else(|| panic!("no {name} in {}", self.body));
        let rest = &self.body[at + marker.len()..];
        rest[..rest.find('"').unwrap()].to_owned()
    }

    /// The text of the `<span id="outcome">`.
    fn outcome(&self) -> String {
        let marker = "id=\"outcome\"";
        let at = self.body.find(marker).expect("an outcome span");
        let rest = &self.body[at..];
        let open = rest.find('>').unwrap() + 1;
        rest[open..open + rest[open..].find('<').unwrap()].to_owned()
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn urlencode(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        let mut out = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

async fn get(s: &Server, path: &str, cookie: Option<&str>) -> Page {
    let mut req = client().get(format!("{}{path}", s.base));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    page(req.send().await.unwrap()).await
}

async fn post(s: &Server, path: &str, cookie: Option<&str>, form: &[(&str, &str)]) -> Page {
    let mut req = client()
        .post(format!("{}{path}", s.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(urlencode(form));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    page(req.send().await.unwrap()).await
}

async fn page(resp: reqwest::Response) -> Page {
    Page {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.text().await.unwrap(),
    }
}

/// `name=value` of the `Set-Cookie` for `name` in `page`.
fn cookie_pair(page: &Page, name: &str) -> String {
    page.set_cookies()
        .into_iter()
        .find(|c| c.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie: {page:?}"))
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

/// Signs in with `token` as a browser would: the sign-in page, then its form.
async fn try_sign_in(s: &Server, token: &str) -> Page {
    let form = get(s, "/ui/sign-in", None).await;
    assert_eq!(form.status, 200, "{form:?}");
    let pre = cookie_pair(&form, "verdict_csrf");
    let csrf = form.hidden("csrf");
    post(
        s,
        "/ui/sign-in",
        Some(&pre),
        &[("csrf", &csrf), ("token", token)],
    )
    .await
}

/// The session cookie (`verdict_session=...`) of a principal that may sign in.
async fn sign_in(s: &Server, token: &str) -> String {
    let r = try_sign_in(s, token).await;
    assert_eq!(r.status, 303, "{r:?}");
    assert_eq!(r.location(), "/ui/queue");
    cookie_pair(&r, "verdict_session")
}

/// A policy that asks a person to approve low-risk work.
fn human_policy() -> Value {
    let mut p = policy();
    p["revision"] = json!(2);
    p["risk"] = json!({"low": {"human": true}});
    p
}

/// A subject of `exec` at `generation` produced by `producer`.
fn subject_of(exec: &str, generation: u64, diff: &str, producer: &str) -> Value {
    let mut doc = subject(generation, diff);
    doc["execution"]["id"] = json!(exec);
    doc["producer"]["principal"] = json!(producer);
    doc
}

/// Grants everyone of the world on `exec` as they are granted on [`EXEC`].
async fn grant_all(w: &World, exec: &str) {
    for (name, access) in [
        ("coder", Access::Write),
        ("ci", Access::Write),
        ("rev", Access::Read),
        ("alice", Access::Write),
    ] {
        w.engine
            .grant(
                &w.ops,
                &format!("g-{name}-{exec}"),
                name,
                ScopeKind::Execution,
                exec,
                access,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
    }
}

/// Puts `doc` (by the operator), passing check evidence and a passing review, and gates it:
/// the policy asks for a person, so the decision is `human_required`.
async fn to_human_required(w: &World, doc: &Value) -> Digest {
    let exec = doc["execution"]["id"].as_str().unwrap().to_owned();
    let ci = w.engine.authenticate(w.token("ci")).await.unwrap();
    let sd = w.engine.put_subject(&w.ops, doc).await.unwrap();
    let generation = doc["execution"]["generation"].as_u64().unwrap();
    let ev = evidence(sd.as_str(), "pass");
    w.engine
        .add_evidence(&ci, std::slice::from_ref(&ev))
        .await
        .unwrap();
    let req = w
        .engine
        .create_request(&w.ops, &exec, &json!({"max_runs": 1}))
        .await
        .unwrap();
    let run = format!("run-{exec}-{generation}");
    w.engine
        .admit(&w.ops, &req, "rev", "reviewer", &run)
        .await
        .unwrap();
    w.engine
        .submit_result(
            &w.rev,
            &result(&run, &sd, generation, ev["id"].as_str().unwrap()),
        )
        .await
        .unwrap();
    let g = w.engine.gate_run(&w.ops, &exec).await.unwrap();
    assert_eq!(g.decision.outcome, Outcome::HumanRequired, "{g:?}");
    sd
}

async fn setup(store: std::sync::Arc<dyn verdict_store::Store>) -> (World, Server) {
    let w = world(store).await;
    w.engine.set_policy(&w.ops, &human_policy()).await.unwrap();
    let s = serve(AppState::new(w.engine.clone())).await;
    (w, s)
}

fn assert_alert(p: &Page, needle: &str) {
    assert!(
        p.body.contains("role=\"alert\" id=\"error\""),
        "no alert: {p:?}"
    );
    assert!(p.body.contains(needle), "alert lacks {needle:?}: {p:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_admits_humans_and_operators_only_and_sets_a_strict_cookie() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;

        // Signed out, /ui goes to the sign-in page, and so does every page.
        let r = get(&s, "/ui", None).await;
        assert_eq!((r.status, r.location()), (303, "/ui/sign-in"));
        let r = get(&s, "/ui/queue", None).await;
        assert_eq!((r.status, r.location()), (303, "/ui/sign-in"));

        let form = get(&s, "/ui/sign-in", None).await;
        assert!(
            form.body
                .contains("<form id=\"sign-in\" method=\"post\" action=\"/ui/sign-in\"")
        );
        assert!(
            form.body
                .contains("type=\"password\" name=\"token\" id=\"token\"")
        );
        assert!(form.body.contains("<label for=\"token\">"));
        assert!(form.body.contains("<html lang=\"en\">"));

        // A human signs in: the cookie holds the token, HttpOnly, SameSite=Strict, Path=/ui,
        // and not Secure on loopback.
        let r = try_sign_in(&s, w.token("alice")).await;
        assert_eq!((r.status, r.location()), (303, "/ui/queue"), "{r:?}");
        let set = r
            .set_cookies()
            .into_iter()
            .find(|c| c.starts_with("verdict_session="))
            .unwrap();
        assert!(
            set.starts_with(&format!("verdict_session={};", w.token("alice"))),
            "{set}"
        );
        for flag in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
            assert!(set.contains(flag), "{flag} missing: {set}");
        }
        assert!(!set.contains("Secure"), "{set}");
        let alice = cookie_pair(&r, "verdict_session");
        let r = get(&s, "/ui", Some(&alice)).await;
        assert_eq!((r.status, r.location()), (303, "/ui/queue"));
        let q = get(&s, "/ui/queue", Some(&alice)).await;
        assert_eq!(q.status, 200);
        assert!(
            q.body.contains("<strong id=\"principal\">alice</strong>"),
            "{q:?}"
        );
        assert!(q.body.contains("<span id=\"role\">human</span>"));

        // An operator may sign in too.
        sign_in(&s, w.token("ops")).await;

        // A producer, a runner and a verifier may not: 403, no session.
        for who in ["coder", "ci", "rev"] {
            let r = try_sign_in(&s, w.token(who)).await;
            assert_eq!(r.status, 403, "{who}: {r:?}");
            assert_alert(&r, "permission_denied");
            assert!(
                !r.set_cookies()
                    .iter()
                    .any(|c| c.starts_with("verdict_session="))
            );
        }

        // A token no principal holds: 401, no session, and the attempt is a recorded denial.
        let before = w.denials().await.len();
        let r = try_sign_in(&s, "vdt_nobody").await;
        assert_eq!(r.status, 401, "{r:?}");
        assert_alert(&r, "unauthenticated");
        assert!(
            !r.set_cookies()
                .iter()
                .any(|c| c.starts_with("verdict_session="))
        );
        assert_eq!(w.denials().await.len(), before + 1);

        // A cookie whose token no principal holds is signed out at once.
        let r = get(&s, "/ui/queue", Some("verdict_session=vdt_forged")).await;
        assert_eq!((r.status, r.location()), (303, "/ui/sign-in"));

        // Sign-out clears the cookie (with the session's CSRF token only).
        let r = post(&s, "/ui/sign-out", Some(&alice), &[("csrf", "wrong")]).await;
        assert_eq!(r.status, 403);
        let csrf = q.hidden("csrf");
        let r = post(&s, "/ui/sign-out", Some(&alice), &[("csrf", &csrf)]).await;
        assert_eq!((r.status, r.location()), (303, "/ui/sign-in"));
        assert!(
            r.set_cookies()
                .iter()
                .any(|c| c.starts_with("verdict_session=;") && c.contains("Max-Age=0"))
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secure_flag_is_set_when_the_server_is_told_it_is_behind_tls() {
    on_both(|store| async move {
        let w = world(store).await;
        let state = AppState {
            ui: std::sync::Arc::new(verdict_server::ui::UiConfig::new(true)),
            ..AppState::new(w.engine.clone())
        };
        let s = serve(state).await;
        let r = try_sign_in(&s, w.token("alice")).await;
        let set = r
            .set_cookies()
            .into_iter()
            .find(|c| c.starts_with("verdict_session="))
            .unwrap();
        assert!(set.contains("; Secure"), "{set}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_without_its_csrf_token_is_refused_and_writes_nothing() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        let sd = to_human_required(&w, &subject_of(EXEC, 1, "diff-1", "coder")).await;

        // Sign-in: no pre-session cookie, a missing token, or one bound to another cookie.
        let form = get(&s, "/ui/sign-in", None).await;
        let csrf = form.hidden("csrf");
        let pre = cookie_pair(&form, "verdict_csrf");
        let before = head_seq(&w).await;
        for (cookie, fields) in [
            (
                None,
                vec![("csrf", csrf.as_str()), ("token", w.token("alice"))],
            ),
            (Some(pre.as_str()), vec![("token", w.token("alice"))]),
            (
                Some("verdict_csrf=vdt_other"),
                vec![("csrf", csrf.as_str()), ("token", w.token("alice"))],
            ),
        ] {
            let r = post(&s, "/ui/sign-in", cookie, &fields).await;
            assert_eq!(r.status, 403, "{r:?}");
            assert_alert(&r, "csrf_failed");
            assert!(
                !r.set_cookies()
                    .iter()
                    .any(|c| c.starts_with("verdict_session="))
            );
        }
        assert_eq!(
            head_seq(&w).await,
            before,
            "a refused sign-in wrote something"
        );

        // The decision form: a missing or wrong token (or another session's) is a 403 page
        // with the alert, and nothing is written, not even a denial.
        let alice = sign_in(&s, w.token("alice")).await;
        let ops = sign_in(&s, w.token("ops")).await;
        let page = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        let ops_page = get(&s, "/ui/executions/ex-1", Some(&ops)).await;
        let policy = page.hidden("policy_digest");
        let before = head_seq(&w).await;
        for token in [None, Some("0".repeat(64)), Some(ops_page.hidden("csrf"))] {
            let mut fields = vec![
                ("subject_digest", sd.as_str()),
                ("policy_digest", policy.as_str()),
                ("verdict", "approve"),
                ("reason", "looks right"),
            ];
            if let Some(t) = &token {
                fields.push(("csrf", t));
            }
            let r = post(&s, "/ui/executions/ex-1/decision", Some(&alice), &fields).await;
            assert_eq!(r.status, 403, "{r:?}");
            assert_alert(&r, "csrf_failed");
            assert_eq!(r.outcome(), "human_required");
        }
        assert_eq!(head_seq(&w).await, before, "a refused form wrote something");
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert_eq!(
            status.applicable.unwrap().decision.outcome,
            Outcome::HumanRequired
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_lists_what_waits_for_a_person_oldest_first() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        let alice = sign_in(&s, w.token("alice")).await;
        let q = get(&s, "/ui/queue", Some(&alice)).await;
        assert!(q.body.contains("<p id=\"queue-empty\">"), "{q:?}");
        assert!(!q.body.contains("<table id=\"queue\">"));

        grant_all(&w, "ex-0").await;
        // ex-1 waits first, then ex-0: the queue is by waiting time, not by id.
        to_human_required(&w, &subject_of(EXEC, 1, "diff-1", "coder")).await;
        to_human_required(&w, &subject_of("ex-0", 1, "diff-0", "coder")).await;
        // ex-2 is not in alice's grants: she never sees it.
        grant_all(&w, "ex-2").await;
        w.engine
            .revoke(&w.ops, "g-alice-ex-2", "not hers")
            .await
            .unwrap();
        to_human_required(&w, &subject_of("ex-2", 1, "diff-2", "coder")).await;

        let q = get(&s, "/ui/queue", Some(&alice)).await;
        assert_eq!(q.status, 200);
        assert!(q.body.contains("<table id=\"queue\">"), "{q:?}");
        let first = q.body.find("data-execution=\"ex-1\"").unwrap();
        let second = q.body.find("data-execution=\"ex-0\"").unwrap();
        assert!(first < second, "not oldest first: {}", q.body);
        assert!(!q.body.contains("data-execution=\"ex-2\""));
        assert!(q.body.contains("<a href=\"/ui/executions/ex-1\">"));
        assert!(q.body.contains("human_review_required"));
        assert!(q.body.contains(">low<"));
        // The operator's board shows every execution with its outcome.
        let ops = sign_in(&s, w.token("ops")).await;
        let b = get(&s, "/ui/board", Some(&ops)).await;
        assert!(b.body.contains("<table id=\"board\">"), "{b:?}");
        for ex in ["ex-0", "ex-1", "ex-2"] {
            assert!(
                b.body.contains(&format!(
                    "data-execution=\"{ex}\" data-outcome=\"human_required\""
                )),
                "{ex}: {}",
                b.body
            );
        }
    })
    .await;
}

/// A producer states its work `low`; the policy's `risk_floor` treats it as `high`. The queue,
/// the board and the execution page show the class the policy treats it as, and the stated one
/// beside it, so a reviewer does not read high-risk work as low; with no floor, only the stated
/// class is shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_sees_the_class_the_policys_floor_raised_work_to() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        to_human_required(&w, &subject_of(EXEC, 1, "diff-1", "coder")).await;
        let alice = sign_in(&s, w.token("alice")).await;
        let ops = sign_in(&s, w.token("ops")).await;
        let raised = "<strong>high</strong> (stated low, raised by the policy&#39;s risk floor)";
        let raised_plain = "<strong>high</strong> (stated low, raised by the policy's risk floor)";
        let shows_raised = |body: &str| body.contains(raised) || body.contains(raised_plain);
        let pages = [
            ("/ui/queue", &alice),
            ("/ui/board", &ops),
            ("/ui/executions/ex-1", &alice),
        ];
        for (path, cookie) in pages {
            let p = get(&s, path, Some(cookie)).await;
            assert_eq!(p.status, 200, "{path}: {p:?}");
            assert!(!shows_raised(&p.body), "{path}: {}", p.body);
            assert!(p.body.contains("low"), "{path}");
        }
        let mut floored = human_policy();
        floored["revision"] = json!(3);
        floored["risk_floor"] = json!("high");
        w.engine.set_policy(&w.ops, &floored).await.unwrap();
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        for (path, cookie) in pages {
            let p = get(&s, path, Some(cookie)).await;
            assert_eq!(p.status, 200, "{path}: {p:?}");
            assert!(shows_raised(&p.body), "{path}: {}", p.body);
        }
    })
    .await;
}

/// The executions listed on `page` (its rows' `data-execution`), in order.
fn listed(page: &Page) -> Vec<String> {
    page.body
        .split("data-execution=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
        .collect()
}

/// The path of `page`'s "Next page" link, if it has one.
fn next_link(page: &Page) -> Option<String> {
    let marker = "id=\"next-page\" rel=\"next\" href=\"";
    let at = page.body.find(marker)? + marker.len();
    let rest = &page.body[at..];
    Some(rest[..rest.find('"').unwrap()].replace("&amp;", "&"))
}

/// Every execution listed from `first` on, following "Next page" links, with each page's
/// length.
async fn walk(s: &Server, cookie: &str, first: &str) -> (Vec<String>, Vec<usize>) {
    let (mut all, mut lengths) = (Vec::new(), Vec::new());
    let mut at = Some(first.to_owned());
    while let Some(path) = at {
        let p = get(s, &path, Some(cookie)).await;
        assert_eq!(p.status, 200, "{path}: {p:?}");
        let rows = listed(&p);
        lengths.push(rows.len());
        all.extend(rows);
        at = next_link(&p);
        assert!(lengths.len() < 50, "the pages never end");
    }
    (all, lengths)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_and_the_board_come_in_pages_listing_each_execution_once() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        // Waiting in this order: ex-1, ex-0, ex-3, ex-2, ex-9.z (the queue's order), and by id
        // on the board. The queue's cursor is `<nanoseconds>.<execution>`: an id holding a dot
        // rides in it too.
        let odd = "ex-9.z";
        for exec in ["ex-0", "ex-2", "ex-3", odd] {
            grant_all(&w, exec).await;
        }
        for exec in [EXEC, "ex-0", "ex-3", "ex-2", odd] {
            to_human_required(&w, &subject_of(exec, 1, &format!("diff-{exec}"), "coder")).await;
        }
        let alice = sign_in(&s, w.token("alice")).await;
        let waiting = [EXEC, "ex-0", "ex-3", "ex-2", odd]
            .map(str::to_owned)
            .to_vec();

        // One a page, then two, then all at once: the same entries in the same order.
        let (one, lengths) = walk(&s, &alice, "/ui/queue?limit=1").await;
        assert_eq!(one, waiting);
        assert_eq!(lengths, vec![1, 1, 1, 1, 1]);
        let (two, lengths) = walk(&s, &alice, "/ui/queue?limit=2").await;
        assert_eq!(two, waiting);
        assert_eq!(lengths, vec![2, 2, 1]);
        let whole = get(&s, "/ui/queue?limit=500", Some(&alice)).await;
        assert_eq!(listed(&whole), waiting);
        assert_eq!(next_link(&whole), None);
        // The default page holds them all here, with no link onwards.
        let default = get(&s, "/ui/queue", Some(&alice)).await;
        assert_eq!(listed(&default), waiting);
        assert_eq!(next_link(&default), None);

        // The board, by id, two a page: every execution once, as on one long page.
        let ops = sign_in(&s, w.token("ops")).await;
        let whole = get(&s, "/ui/board?limit=500", Some(&ops)).await;
        let everything = listed(&whole);
        let mut sorted = everything.clone();
        sorted.sort();
        assert_eq!(everything.len(), 5, "{everything:?}");
        let (paged, lengths) = walk(&s, &ops, "/ui/board?limit=2").await;
        assert_eq!(paged, everything);
        assert_eq!(lengths, vec![2, 2, 1]);

        // A cursor or a length the pages did not make: a 422 page saying what is wrong.
        for (path, needle) in [
            ("/ui/queue?after=garbage", "queue cursor"),
            ("/ui/queue?after=12.", "queue cursor"),
            ("/ui/queue?limit=0", "page limit"),
            ("/ui/board?limit=501", "page limit"),
            ("/ui/board?limit=many", "page limit"),
        ] {
            let r = get(&s, path, Some(&ops)).await;
            assert_eq!(r.status, 422, "{path}: {r:?}");
            assert_alert(&r, needle);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sign_ins_are_limited_but_a_held_token_still_signs_in() {
    on_both(|store| async move {
        let w = world(store).await;
        let state =
            AppState::new(w.engine.clone()).with_auth_limit(verdict_server::limit::AuthLimit {
                burst: 2,
                per_minute: 1,
                ..verdict_server::limit::AuthLimit::default()
            });
        let s = serve(state).await;
        let before = w.denials().await.len();
        for _ in 0..2 {
            let r = try_sign_in(&s, "vdt_guess").await;
            assert_eq!(r.status, 401, "{r:?}");
        }
        assert_eq!(w.denials().await.len(), before + 2);

        // The address's failures are spent: the next guess is a 429 page that says when to
        // try again, and writes nothing, not even a denial.
        let seq = head_seq(&w).await;
        let r = try_sign_in(&s, "vdt_guess").await;
        assert_eq!(r.status, 429, "{r:?}");
        assert_alert(&r, "rate_limited");
        let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!(retry >= 1, "{retry}");
        assert!(
            !r.set_cookies()
                .iter()
                .any(|c| c.starts_with("verdict_session="))
        );
        assert_eq!(head_seq(&w).await, seq, "a limited sign-in wrote something");

        // A reviewer on the same address, holding a real token, still signs in.
        sign_in(&s, w.token("alice")).await;
        // And a held token of a role that may not sign in is still told why, not limited.
        let r = try_sign_in(&s, w.token("coder")).await;
        assert_eq!(r.status, 403, "{r:?}");
    })
    .await;
}

/// `GET path` from the loopback address `from`, with `cookie`.
async fn get_from(s: &Server, from: std::net::IpAddr, path: &str, cookie: &str) -> Page {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(from)
        .no_proxy()
        .build()
        .unwrap();
    let req = client
        .get(format!("{}{path}", s.base))
        .header("cookie", cookie);
    page(req.send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_cookies_and_bearer_tokens_spend_one_allowance_of_failures() {
    on_both(|store| async move {
        let w = world(store).await;
        let state =
            AppState::new(w.engine.clone()).with_auth_limit(verdict_server::limit::AuthLimit {
                burst: 2,
                per_minute: 1,
                ..verdict_server::limit::AuthLimit::default()
            });
        let s = serve(state).await;
        let bogus = "verdict_session=vdt_guess";
        let held = format!("verdict_session={}", w.token("alice"));
        let pages = ["/ui/queue", "/ui", "/ui/board", "/ui/executions/ex-1"];

        // One address spends its failures on the API...
        let a: std::net::IpAddr = [127, 0, 0, 31].into();
        for _ in 0..2 {
            let r = s
                .send_from(a, "GET", "/v1/executions", Some("vdt_guess"))
                .await;
            assert_problem(&r, 401, "unauthenticated");
        }
        let r = s
            .send_from(a, "GET", "/v1/executions", Some("vdt_guess"))
            .await;
        assert_problem(&r, 429, "rate_limited");
        // ...so its pages with a cookie no principal holds are answered as the API answers,
        // and write no denial.
        let seq = head_seq(&w).await;
        for path in pages {
            let r = get_from(&s, a, path, bogus).await;
            assert_eq!(r.status, 429, "{path}: {r:?}");
            assert_alert(&r, "rate_limited");
            let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
            assert!(retry >= 1, "{path}: {retry}");
        }
        let r = get_from(&s, a, "/ui/nowhere", bogus).await;
        assert_eq!(r.status, 404, "{r:?}");
        assert_eq!(head_seq(&w).await, seq, "a limited page wrote something");
        // A reviewer on that address, with a session a principal holds, is not limited.
        let r = get_from(&s, a, "/ui/queue", &held).await;
        assert_eq!(r.status, 200, "{r:?}");

        // And the other way: another address spends its failures on pages...
        let b: std::net::IpAddr = [127, 0, 0, 32].into();
        let before = w.denials().await.len();
        for _ in 0..2 {
            let r = get_from(&s, b, "/ui/queue", bogus).await;
            assert_eq!(r.status, 303, "{r:?}");
            assert_eq!(r.location(), "/ui/sign-in");
        }
        assert_eq!(w.denials().await.len(), before + 2);
        let seq = head_seq(&w).await;
        for path in pages {
            let r = get_from(&s, b, path, bogus).await;
            assert_eq!(r.status, 429, "{path}: {r:?}");
        }
        // ...and is limited on the API too, writing nothing, while a held token is served.
        let r = s
            .send_from(b, "GET", "/v1/executions", Some("vdt_guess"))
            .await;
        assert_problem(&r, 429, "rate_limited");
        assert_eq!(head_seq(&w).await, seq, "a limited request wrote something");
        let r = s
            .send_from(b, "GET", "/v1/executions", Some(w.token("ops")))
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let r = get_from(&s, b, "/ui/queue", &held).await;
        assert_eq!(r.status, 200, "{r:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_sharing_a_key_accept_each_others_forms_and_others_refuse_them() {
    on_both(|store| async move {
        let w = world(store).await;
        let key = b"0123456789abcdef0123456789abcdef".to_vec();
        let with = |key: Vec<u8>| AppState {
            ui: std::sync::Arc::new(verdict_server::ui::UiConfig::with_key(key, false).unwrap()),
            ..AppState::new(w.engine.clone())
        };
        let (a, b) = (serve(with(key.clone())).await, serve(with(key)).await);
        let lone = serve(AppState::new(w.engine.clone())).await;

        // The sign-in form from one server, posted to the other behind the same address.
        let form = get(&a, "/ui/sign-in", None).await;
        let (pre, csrf) = (cookie_pair(&form, "verdict_csrf"), form.hidden("csrf"));
        let fields = [("csrf", csrf.as_str()), ("token", w.token("alice"))];
        let r = post(&b, "/ui/sign-in", Some(&pre), &fields).await;
        assert_eq!((r.status, r.location()), (303, "/ui/queue"), "{r:?}");
        // A session's forms too: sign out on `a` with the token `b` served.
        let session = cookie_pair(&r, "verdict_session");
        let q = get(&b, "/ui/queue", Some(&session)).await;
        let out = post(
            &a,
            "/ui/sign-out",
            Some(&session),
            &[("csrf", &q.hidden("csrf"))],
        )
        .await;
        assert_eq!(
            (out.status, out.location()),
            (303, "/ui/sign-in"),
            "{out:?}"
        );

        // A server with a key of its own refuses them, and writes nothing.
        let seq = head_seq(&w).await;
        let r = post(&lone, "/ui/sign-in", Some(&pre), &fields).await;
        assert_eq!(r.status, 403, "{r:?}");
        assert_alert(&r, "csrf_failed");
        assert_eq!(head_seq(&w).await, seq);

        // A key too short to make tokens under is refused.
        assert!(verdict_server::ui::UiConfig::with_key(vec![7; 31], false).is_err());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_execution_page_shows_every_section_and_the_digests_decided_on() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        let mut doc = subject_of(EXEC, 1, "diff-1", "coder");
        doc["criteria"]["items"][0]["text"] = json!("<script>alert(1)</script> & more");
        let sd = to_human_required(&w, &doc).await;
        let alice = sign_in(&s, w.token("alice")).await;
        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        assert_eq!(p.status, 200, "{p:?}");
        assert_eq!(p.outcome(), "human_required");
        for id in [
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
            assert!(
                p.body.contains(&format!("<section id=\"{id}\"")),
                "no section {id}"
            );
        }
        assert_eq!(p.body.matches("<h1>").count(), 1);
        assert!(p.body.contains("href=\"/ui/executions/ex-1/lineage\""));
        let gate = w.engine.gate_policy_head(&w.ops).await.unwrap().unwrap();
        assert_eq!(p.hidden("subject_digest"), sd.as_str());
        assert_eq!(p.hidden("policy_digest"), gate.policy_digest.as_str());
        assert!(
            p.body
                .contains(&format!("<code id=\"subject-digest\">{sd}</code>"))
        );
        // The resource's digest, the evidence, the matrix's check and verifier columns.
        assert!(
            p.body
                .contains(verdict_core::digest::raw(b"diff-1").as_str())
        );
        assert!(p.body.contains("unit-tests"));
        assert!(p.body.contains("reviewer"));
        assert!(p.body.contains("2026-11-30T11:59:00Z"));
        // The form: radios, labelled textarea, submit.
        assert!(p.body.contains(
            "<form id=\"decide\" method=\"post\" action=\"/ui/executions/ex-1/decision\""
        ));
        assert!(p.body.contains("id=\"verdict-approve\""));
        assert!(p.body.contains("id=\"verdict-reject\""));
        assert!(p.body.contains("<textarea name=\"reason\" id=\"reason\""));
        assert!(p.body.contains("<label for=\"reason\">"));
        assert!(p.body.contains("id=\"decide-submit\""));
        // What the producer wrote is text, never markup.
        assert!(!p.body.contains("<script>"), "unescaped script");
        assert!(
            p.body
                .contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; more")
        );

        // Security headers on every page.
        let csp = p.headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(p.headers["x-frame-options"], "DENY");
        assert_eq!(p.headers["referrer-policy"], "no-referrer");
        assert_eq!(p.headers["cache-control"], "no-store");
        let css = get(&s, "/ui/assets/ui.css", None).await;
        assert_eq!(css.status, 200);
        assert!(
            css.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/css")
        );

        // An operator reads the page but gets no decision form.
        let ops = sign_in(&s, w.token("ops")).await;
        let p = get(&s, "/ui/executions/ex-1", Some(&ops)).await;
        assert_eq!(p.status, 200);
        assert!(!p.body.contains("id=\"decide\""));

        // The lineage and reliability pages render.
        let l = get(&s, "/ui/executions/ex-1/lineage", Some(&alice)).await;
        assert!(l.body.contains("<section id=\"lineage\""), "{l:?}");
        let r = get(&s, "/ui/reliability", Some(&ops)).await;
        assert_eq!(r.status, 200);
        assert!(
            r.body.contains("<svg role=\"img\"") || r.body.contains("id=\"reliability-empty\""),
            "{r:?}"
        );
    })
    .await;
}

/// Submits the decision form of `page` with `verdict` and `reason`.
async fn decide(s: &Server, cookie: &str, page: &Page, verdict: &str, reason: &str) -> Page {
    post(
        s,
        "/ui/executions/ex-1/decision",
        Some(cookie),
        &[
            ("csrf", &page.hidden("csrf")),
            ("subject_digest", &page.hidden("subject_digest")),
            ("policy_digest", &page.hidden("policy_digest")),
            ("reviewed_decision", &page.hidden("reviewed_decision")),
            ("verdict", verdict),
            ("reason", reason),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_passes_and_rejecting_sends_to_rework() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        to_human_required(&w, &subject_of(EXEC, 1, "diff-1", "coder")).await;
        let alice = sign_in(&s, w.token("alice")).await;

        // An empty reason: 422 with the alert, nothing written.
        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        let before = head_seq(&w).await;
        let r = decide(&s, &alice, &p, "approve", "   ").await;
        assert_eq!(r.status, 422, "{r:?}");
        assert_alert(&r, "invalid_input");
        assert_eq!(head_seq(&w).await, before);

        // A link that claims a decision was made shows no notice while none was: not the old
        // `?decided=1`, nor a digest of something else.
        for link in [
            "/ui/executions/ex-1?decided=1",
            &format!(
                "/ui/executions/ex-1?decided={}",
                verdict_core::digest::raw(b"no such decision")
            ),
        ] {
            let p = get(&s, link, Some(&alice)).await;
            assert_eq!(p.status, 200, "{p:?}");
            assert!(!p.body.contains("id=\"notice\""), "{link}: {p:?}");
        }
        let r = decide(&s, &alice, &p, "approve", "checked the diff <b>by hand</b>").await;
        assert_eq!(r.status, 303, "{r:?}");
        let location = r.location().to_owned();
        assert!(
            location.starts_with("/ui/executions/ex-1?decided=sha256%3A")
                || location.starts_with("/ui/executions/ex-1?decided=sha256:"),
            "{r:?}"
        );
        let p = get(&s, &location, Some(&alice)).await;
        assert!(p.body.contains("<p role=\"status\" id=\"notice\""), "{p:?}");
        // The same link read by another principal says nothing was recorded by them.
        let ops = sign_in(&s, w.token("ops")).await;
        let other = get(&s, &location, Some(&ops)).await;
        assert!(!other.body.contains("id=\"notice\""), "{other:?}");
        assert_eq!(p.outcome(), "pass");
        assert!(!p.body.contains("<b>by hand"));
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert_eq!(status.applicable.unwrap().decision.outcome, Outcome::Pass);

        // The next generation waits for a person again; a rejection sends it to rework.
        to_human_required(&w, &subject_of(EXEC, 2, "diff-2", "coder")).await;
        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        assert_eq!(p.outcome(), "human_required");
        let r = decide(&s, &alice, &p, "reject", "the error path is untested").await;
        assert_eq!(r.status, 303, "{r:?}");
        let p = get(&s, r.location(), Some(&alice)).await;
        assert!(p.body.contains("id=\"notice\""), "{p:?}");
        assert_eq!(p.outcome(), "rework");
        assert!(p.body.contains("human_rejected"));

        // The ledger now holds the decided attempts: the operator's reliability page charts
        // each cohort the engine reports, with its line, its band and its data table.
        let series = w.engine.reliability_series(&w.ops).await.unwrap().series;
        assert!(!series.is_empty(), "the decided execution left no attempt");
        let ops = sign_in(&s, w.token("ops")).await;
        let r = get(&s, "/ui/reliability", Some(&ops)).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(!r.body.contains("id=\"reliability-empty\""), "{r:?}");
        assert_eq!(r.body.matches("<svg role=\"img\"").count(), series.len());
        for c in &series {
            assert!(
                r.body
                    .contains(&format!("data-capability=\"{}\"", c.capability.written())),
                "{} is not charted: {r:?}",
                c.capability.written()
            );
            assert!(
                r.body.matches("<tr><th scope=\"row\">").count() >= c.points.len(),
                "the data table lists every point"
            );
        }
        assert!(r.body.contains("<polyline"), "no pass-rate line: {r:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_producer_may_not_decide_and_a_stale_page_is_refused() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        // The operator puts a subject naming alice, a human, as its producer.
        let sd = to_human_required(&w, &subject_of(EXEC, 1, "diff-1", "alice")).await;
        let alice = sign_in(&s, w.token("alice")).await;
        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        assert!(
            !p.body.contains("id=\"decide\""),
            "the producer is offered the form"
        );
        // Even posting the form by hand is refused, and only the denial is written.
        let ops = sign_in(&s, w.token("ops")).await;
        let ops_page = get(&s, "/ui/executions/ex-1", Some(&ops)).await;
        let policy = ops_page.body.split("id=\"policy-digest\">").nth(1).unwrap();
        let policy = &policy[..policy.find('<').unwrap()];
        let before = head_seq(&w).await;
        let r = post(
            &s,
            "/ui/executions/ex-1/decision",
            Some(&alice),
            &[
                ("csrf", &p.hidden("csrf")),
                ("subject_digest", sd.as_str()),
                ("policy_digest", policy),
                ("verdict", "approve"),
                ("reason", "mine is fine"),
            ],
        )
        .await;
        assert_eq!(r.status, 403, "{r:?}");
        assert_alert(&r, "self_verification_denied");
        let after = events_after(&w, before).await;
        assert_eq!(after.len(), 1, "{after:?}");
        assert_eq!(after[0].table, "denials");

        // An operator is refused too (not a human).
        let before = head_seq(&w).await;
        let r = post(
            &s,
            "/ui/executions/ex-1/decision",
            Some(&ops),
            &[
                ("csrf", &ops_page.hidden("csrf")),
                ("subject_digest", sd.as_str()),
                ("policy_digest", policy),
                ("verdict", "approve"),
                ("reason", "ops says so"),
            ],
        )
        .await;
        assert_eq!(r.status, 403, "{r:?}");
        assert_alert(&r, "permission_denied");
        assert_eq!(events_after(&w, before).await.len(), 1);

        // Next generation by coder; alice opens the page, then the subject moves.
        to_human_required(&w, &subject_of(EXEC, 2, "diff-2", "coder")).await;
        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        let shown = p.hidden("subject_digest");
        let moved = to_human_required(&w, &subject_of(EXEC, 3, "diff-3", "coder")).await;
        let before = head_seq(&w).await;
        let r = decide(&s, &alice, &p, "approve", "approved what I saw").await;
        assert_eq!(r.status, 409, "{r:?}");
        assert_alert(&r, "moved while this page was open");
        assert!(r.body.contains(&shown), "the alert names the digest shown");
        assert!(
            r.body.contains(moved.as_str()),
            "the alert names the current digest"
        );
        assert_eq!(
            head_seq(&w).await,
            before,
            "a stale decision wrote something"
        );
        // The page re-rendered offers the current subject.
        assert_eq!(r.hidden("subject_digest"), moved.as_str());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_resource_bytes_are_shown_as_a_diff_text_or_size() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        let diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old line\n+<script>alert(2)</script>\n same\n";
        let notes = "first note\nsecond note\n";
        let bin: &[u8] = &[0x89, 0x50, 0x00, 0xff, 0xfe];
        let mut doc = subject_of(EXEC, 1, diff, "coder");
        doc["resources"] = json!([
            {"name": "diff", "kind": "git_diff", "digest": verdict_core::digest::raw(diff.as_bytes()).as_str()},
            {"name": "notes", "kind": "text", "digest": verdict_core::digest::raw(notes.as_bytes()).as_str()},
            {"name": "image", "kind": "file", "digest": verdict_core::digest::raw(bin).as_str()},
            {"name": "absent", "kind": "file", "digest": verdict_core::digest::raw(b"never put").as_str()},
        ]);
        // The producer puts the bytes its subject names (a subject names only bytes its
        // producer may read).
        let coder = w.engine.authenticate(w.token("coder")).await.unwrap();
        for bytes in [diff.as_bytes(), notes.as_bytes(), bin] {
            let d = verdict_core::digest::raw(bytes);
            w.engine.put_blob(&coder, d.as_str(), bytes, None).await.unwrap();
        }
        to_human_required(&w, &doc).await;
        let alice = sign_in(&s, w.token("alice")).await;
        let before = head_seq(&w).await;
        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        assert_eq!(p.status, 200, "{p:?}");
        assert_eq!(head_seq(&w).await, before, "reading the page wrote something");
        let section = &p.body[p.body.find("<section id=\"resources\"").unwrap()..p.body.find("<section id=\"matrix\"").unwrap()];
        assert!(section.contains("<tr class=\"d-del\">"), "{section}");
        assert!(section.contains("<tr class=\"d-add\">"), "{section}");
        assert!(section.contains("<pre>-old line</pre>"), "{section}");
        assert!(section.contains("&lt;script&gt;alert(2)&lt;/script&gt;"), "{section}");
        assert!(!section.contains("<script>"));
        assert!(section.contains("<pre>second note</pre>"), "{section}");
        assert!(section.contains("Binary content, 5 bytes"), "{section}");
        assert!(section.contains("not stored"), "{section}");
        assert!(!section.contains("truncated"), "{section}");
    })
    .await;
}

/// Stores `record`, a principal whose name was stored before names were held to a rule: on
/// SQLite through the store as the operator, around the engine; on PostgreSQL, whose database
/// refuses such a name from every identity since schema 35, the way only its superuser (with no
/// role set, not bound by the checks) still can: the routine called on its own connection.
async fn store_old_principal(
    store: &dyn verdict_store::Store,
    record: &verdict_store::PrincipalRecord,
) {
    use sqlx::Connection as _;
    let described = store.describe();
    if !described.starts_with("postgres") {
        store
            .add_principal(
                &verdict_store::Actor::new("ops", verdict_store::ActorRole::Operator),
                record,
            )
            .await
            .unwrap();
        return;
    }
    let body = String::from_utf8(verdict_core::canonical::to_vec(
        &serde_json::to_value(record).unwrap(),
    ))
    .unwrap();
    let digest = verdict_store::records::row_digest(
        verdict_store::Table::Principals.domain(),
        body.as_bytes(),
    );
    // The store describes itself as its URL, followed by its role prefix.
    let url = described.split(" (").next().unwrap();
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let inserted: Option<bool> = sqlx::query_scalar(
        "SELECT r_inserted FROM verdict.put_one_principals('ops', 'operator', $1, $2, $3, NULL)",
    )
    .bind(record.name.as_str())
    .bind(digest.as_str())
    .bind(&body)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    assert_eq!(inserted, Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_principals_wrote_is_drawn_with_hidden_characters_escaped_and_look_alikes_flagged() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        // The producer's criterion hides a right-to-left override and an `оperator` with a
        // Cyrillic `о`; its run is named with one too.
        let mut doc = subject_of(EXEC, 1, "diff-1", "coder");
        doc["criteria"]["items"][0]["text"] =
            json!("tests pass \u{202E}for the \u{43e}perator of \u{430}\u{440}\u{440}\u{4cf}\u{435}");
        doc["producer"]["run"] = json!("run-c\u{43e}der");
        let ci = w.engine.authenticate(w.token("ci")).await.unwrap();
        let sd = w.engine.put_subject(&w.ops, &doc).await.unwrap();
        let ev = evidence(sd.as_str(), "pass");
        w.engine.add_evidence(&ci, std::slice::from_ref(&ev)).await.unwrap();
        let req = w.engine.create_request(&w.ops, EXEC, &json!({"max_runs": 1})).await.unwrap();
        w.engine.admit(&w.ops, &req, "rev", "reviewer", "run-1").await.unwrap();
        // The verifier's finding does the same in its remediation, kind and location.
        let mut res = result("run-1", &sd, 1, ev["id"].as_str().unwrap());
        res["findings"] = json!([{
            "id": "f-1", "version": 1, "criterion": "tests-pass", "type": "st\u{443}le",
            "severity": "info", "scope": "pre_existing", "subject_digest": sd.as_str(),
            "location": {"resource": "diff", "path": "src/\u{430}uth.rs"},
            "evidence_refs": [ev["id"]], "method": "review",
            "remediation": "ask the \u{43e}perator \u{202E}first"
        }, {
            // Hebrew beside digits: a browser would move the digits to the Hebrew side.
            "id": "f-2", "version": 1, "criterion": "tests-pass", "type": "style",
            "severity": "info", "scope": "pre_existing", "subject_digest": sd.as_str(),
            "evidence_refs": [ev["id"]], "method": "review",
            "remediation": "keep 10 \u{5d0}\u{5d1} of 20"
        }]);
        w.engine.submit_result(&w.rev, &res).await.unwrap();
        w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        // A person whose name was stored before names were held to ASCII (written around the
        // engine, as the operator) still signs in, and the page flags the name.
        let old = "\u{43e}ld-reviewer";
        store_old_principal(
            w.engine.store().as_ref(),
            &verdict_store::PrincipalRecord {
                name: old.parse().unwrap(),
                role: verdict_core::contracts::Role::Human,
                token_sha256: verdict_store::token_sha256("vdt_old"),
            },
        )
        .await;
        w.engine
            .grant(
                &w.ops,
                "g-old",
                old,
                ScopeKind::Execution,
                EXEC,
                Access::Write,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        let cookie = sign_in(&s, "vdt_old").await;
        let esc = |code: &str, name: &str| {
            format!(
                "<span class=\"esc\" role=\"img\" aria-label=\"{code} {name}\" title=\"{name}\">&lt;{code}&gt;</span>"
            )
        };
        let flag = |why: &str| format!("<span class=\"flag\">[{why}]</span>");
        let rlo = esc("U+202E", "right-to-left override");
        let cyrillic_o = flag("not ASCII: U+043E Cyrillic");
        let p = get(&s, "/ui/executions/ex-1", Some(&cookie)).await;
        assert_eq!(p.status, 200, "{p:?}");
        let l = get(&s, "/ui/executions/ex-1/lineage", Some(&cookie)).await;
        assert_eq!(l.status, 200, "{l:?}");
        // Nothing anyone wrote reorders or hides what either page draws.
        for page in [&p, &l] {
            for c in page.body.chars() {
                assert!(
                    !BIDI.contains(&c) && (c == '\n' || !c.is_control()),
                    "U+{:04X} is drawn as itself",
                    u32::from(c)
                );
            }
        }
        // The criterion, in the subject's list and in the matrix.
        // A word wholly of Cyrillic look-alikes beside Latin words is flagged with the Latin it
        // passes for.
        let criterion = format!(
            "tests pass {rlo}for the \u{43e}perator {} of \u{430}\u{440}\u{440}\u{4cf}\u{435} {}",
            flag("mixes scripts Cyrillic, Latin: U+043E Cyrillic"),
            flag(
                "looks like Latin &quot;apple&quot;: U+0430 Cyrillic, U+0440 Cyrillic, \
                 U+0440 Cyrillic, U+04CF Cyrillic, U+0435 Cyrillic"
            )
        );
        assert_eq!(p.body.matches(&criterion).count(), 2, "{criterion} in {}", p.body);
        // The finding's remediation, kind and location.
        for drawn in [
            format!(
                "ask the \u{43e}perator {} {rlo}first",
                flag("mixes scripts Cyrillic, Latin: U+043E Cyrillic")
            ),
            format!("st\u{443}le {}", flag("not ASCII: U+0443 Cyrillic")),
            format!("diff:src/\u{430}uth.rs {}", flag("not ASCII: U+0430 Cyrillic")),
            // Right-to-left text, drawn in the order written and said to be.
            format!(
                "<bdo dir=\"ltr\">keep 10 \u{5d0}\u{5d1} of 20 {}</bdo>",
                flag("right-to-left, drawn left to right in the order written: U+05D0 Hebrew, U+05D1 Hebrew")
            ),
            // The producer's run, and the name of the person signed in.
            format!("run-c\u{43e}der {cyrillic_o}"),
            format!("<strong id=\"principal\">{old} {cyrillic_o}</strong>"),
        ] {
            assert!(p.body.contains(&drawn), "{drawn} not in {}", p.body);
        }
        assert!(l.body.contains(&format!("<strong id=\"principal\">{old} {cyrillic_o}</strong>")));
        // Text as written stays only where a browser does not draw it.
        assert!(p.body.contains("<tr data-criterion=\"tests-pass\">"), "{}", p.body);
    })
    .await;
}

/// The characters that reorder the text around them (Trojan Source).
const BIDI: [char; 12] = [
    '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}',
    '\u{2069}', '\u{200E}', '\u{200F}', '\u{061C}',
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diff_is_drawn_as_its_bytes_are_whatever_it_holds() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        // One hunk: a removed and an added line that look like the next file's headers, an
        // added line whose `\r` would hide its start, one holding every bidirectional control,
        // and one with a tab and a bell; the same controls in a text resource.
        let bidi: String = BIDI.iter().map(|c| format!("{c}x")).collect();
        let diff = format!(
            "diff --git a/src/auth.rs b/src/auth.rs\n--- a/src/auth.rs\n+++ b/src/auth.rs\n\
             @@ -1,3 +1,6 @@\n fn check() {{\n--- a/src/auth.rs\n+++ b/evil\n\
             +    return true; // \rcheck the password\n+    let s = \"{bidi}\";\n+\tbell\u{7}\n }}\n"
        );
        let mut doc = subject_of(EXEC, 1, &diff, "coder");
        doc["resources"] = json!([
            {"name": "diff", "kind": "git_diff", "digest": verdict_core::digest::raw(diff.as_bytes()).as_str()},
            {"name": "notes", "kind": "text", "digest": verdict_core::digest::raw(bidi.as_bytes()).as_str()},
        ]);
        let coder = w.engine.authenticate(w.token("coder")).await.unwrap();
        for bytes in [diff.as_bytes(), bidi.as_bytes()] {
            let d = verdict_core::digest::raw(bytes);
            w.engine.put_blob(&coder, d.as_str(), bytes, None).await.unwrap();
        }
        to_human_required(&w, &doc).await;
        let alice = sign_in(&s, w.token("alice")).await;
        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        assert_eq!(p.status, 200, "{p:?}");
        let section = &p.body[p.body.find("<section id=\"resources\"").unwrap()
            ..p.body.find("<section id=\"matrix\"").unwrap()];
        // Nothing the bytes hold reorders, hides or overprints what the page draws.
        for c in section.chars() {
            let code = u32::from(c);
            assert!(
                !BIDI.contains(&c) && (c == '\t' || c == '\n' || !c.is_control()),
                "U+{code:04X} is drawn as itself"
            );
        }
        let row = |class: &str, label: &str, text: &str| {
            format!(
                "<tr class=\"{class}\"><th scope=\"row\" class=\"ln\"><span class=\"visually-hidden\">{label}</span></th><td><pre>{text}</pre></td></tr>"
            )
        };
        // Inside the hunk, by its counts, the lines that look like headers are a removed and
        // an added line of this file.
        assert!(section.contains(&row("d-del", "removed", "--- a/src/auth.rs")), "{section}");
        assert!(section.contains(&row("d-add", "added", "+++ b/evil")), "{section}");
        assert_eq!(section.matches("<tr class=\"d-head\">").count(), 4, "{section}");
        assert_eq!(section.matches("<tr class=\"d-add\">").count(), 4, "{section}");
        let esc = |code: &str, name: &str| {
            format!(
                "<span class=\"esc\" role=\"img\" aria-label=\"{code} {name}\" title=\"{name}\">&lt;{code}&gt;</span>"
            )
        };
        assert!(
            section.contains(&row(
                "d-add",
                "added",
                &format!("+    return true; // {}check the password", esc("U+000D", "carriage return"))
            )),
            "{section}"
        );
        assert!(
            section.contains(&row("d-add", "added", &format!("+\tbell{}", esc("U+0007", "bell")))),
            "{section}"
        );
        for (c, name) in BIDI.iter().zip([
            "left-to-right embedding",
            "right-to-left embedding",
            "pop directional formatting",
            "left-to-right override",
            "right-to-left override",
            "left-to-right isolate",
            "right-to-left isolate",
            "first strong isolate",
            "pop directional isolate",
            "left-to-right mark",
            "right-to-left mark",
            "arabic letter mark",
        ]) {
            let shown = format!("{}x", esc(&format!("U+{:04X}", u32::from(*c)), name));
            // Once in the diff's line, once in the text resource.
            assert_eq!(section.matches(&shown).count(), 2, "{shown} in {section}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_is_offered_no_decision_and_an_unknown_page_is_an_html_404() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        to_human_required(&w, &subject_of(EXEC, 1, "diff-1", "coder")).await;
        // A human with a read grant only may review, but is offered no decision, which the
        // engine would refuse.
        let role = serde_json::from_value(json!("human")).unwrap();
        let token = w.engine.add_principal(&w.ops, "rita", role).await.unwrap();
        w.engine
            .grant(
                &w.ops,
                "g-rita",
                "rita",
                ScopeKind::Execution,
                EXEC,
                Access::Read,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        let rita = sign_in(&s, &token).await;
        let p = get(&s, "/ui/executions/ex-1", Some(&rita)).await;
        assert_eq!(p.status, 200, "{p:?}");
        assert_eq!(p.outcome(), "human_required");
        assert!(
            !p.body.contains("id=\"decide\""),
            "a reader is offered the form"
        );
        // The human with a write grant is.
        let alice = sign_in(&s, w.token("alice")).await;
        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        assert!(p.body.contains("id=\"decide\""), "{p:?}");

        // An address under /ui that is no page: an HTML page with the alert, signed in or not.
        for cookie in [Some(alice.as_str()), None] {
            let r = get(&s, "/ui/no-such-page", cookie).await;
            assert_eq!(r.status, 404, "{r:?}");
            assert!(r.body.starts_with("<!DOCTYPE html>"), "{r:?}");
            assert_alert(&r, "not_found");
        }
    })
    .await;
}

/// `body` posted to `path` as `media`, with `cookie`.
async fn post_as(s: &Server, path: &str, cookie: Option<&str>, media: &str, body: &str) -> Page {
    let mut req = client()
        .post(format!("{}{path}", s.base))
        .header("content-type", media)
        .body(body.to_owned());
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    page(req.send().await.unwrap()).await
}

/// Asserts `p` is an HTML page at `status` whose alert names `code`.
fn assert_page(p: &Page, status: u16, code: &str) {
    assert_eq!(p.status, status, "{p:?}");
    assert!(
        p.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html"),
        "{p:?}"
    );
    assert!(p.body.starts_with("<!DOCTYPE html>"), "{p:?}");
    assert_alert(p, code);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_page_input_is_an_html_page_naming_what_is_wrong_and_writes_nothing() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        let sd = to_human_required(&w, &subject_of(EXEC, 1, "diff-1", "coder")).await;
        let alice = sign_in(&s, w.token("alice")).await;
        let page = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        let csrf = page.hidden("csrf");
        let policy = page.hidden("policy_digest");
        let before = head_seq(&w).await;

        // An execution id no execution can have, on every execution page alike: refused
        // before the store is asked. Under the issue's attack the lineage page asked it, and
        // PostgreSQL answered with its own error text while SQLite recorded a denial.
        let long = "a".repeat(3000);
        for id in ["ex%00", "ex%01", long.as_str()] {
            for tail in ["", "/lineage"] {
                let p = get(&s, &format!("/ui/executions/{id}{tail}"), Some(&alice)).await;
                assert_page(&p, 422, "invalid_input");
                assert!(
                    p.body.contains("is not an execution id"),
                    "{id}{tail}: {p:?}"
                );
                assert!(!p.body.contains("SQLSTATE"), "{p:?}");
            }
        }
        // A path segment that is not UTF-8, and a query field given twice.
        for path in [
            "/ui/executions/%FF",
            "/ui/executions/%FF/lineage",
            "/ui/executions/ex-1?decided=a&decided=b",
        ] {
            let p = get(&s, path, Some(&alice)).await;
            assert_page(&p, 422, "invalid_input");
            assert!(p.body.contains("cannot be read"), "{path}: {p:?}");
        }
        // Forms that are not forms, or give a field twice: nothing is recorded.
        let form = urlencode(&[
            ("csrf", &csrf),
            ("subject_digest", sd.as_str()),
            ("policy_digest", &policy),
            ("verdict", "approve"),
            ("reason", "looks right"),
        ]);
        let json = r#"{"verdict": "approve"}"#;
        let twice = format!("{form}&csrf=a");
        let urlencoded = "application/x-www-form-urlencoded";
        for (path, media, body, status, code) in [
            (
                "/ui/executions/ex-1/decision",
                "application/json",
                json,
                415,
                "unsupported_media_type",
            ),
            (
                "/ui/executions/ex-1/decision",
                urlencoded,
                twice.as_str(),
                422,
                "invalid_input",
            ),
            (
                "/ui/executions/%FF/decision",
                urlencoded,
                form.as_str(),
                422,
                "invalid_input",
            ),
            (
                "/ui/executions/ex-1/gate-run",
                "application/json",
                json,
                415,
                "unsupported_media_type",
            ),
            (
                "/ui/executions/ex-1/gate-run",
                urlencoded,
                "csrf=a&csrf=b",
                422,
                "invalid_input",
            ),
            (
                "/ui/sign-out",
                "application/json",
                json,
                415,
                "unsupported_media_type",
            ),
        ] {
            let p = post_as(&s, path, Some(&alice), media, body).await;
            assert_page(&p, status, code);
        }
        let p = post_as(&s, "/ui/sign-in", None, "application/json", json).await;
        assert_page(&p, 415, "unsupported_media_type");
        assert!(p.body.contains("id=\"sign-in\""), "{p:?}");

        assert_eq!(
            head_seq(&w).await,
            before,
            "malformed input wrote something"
        );
        // Still signed in, and the decision still waits for a person.
        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        assert_eq!(p.status, 200, "{p:?}");
        assert_eq!(p.outcome(), "human_required");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reliability_page_and_the_ledger_are_an_operators() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        // A decided attempt the human may read, so a page scoped to its grants would chart it.
        to_human_required(&w, &subject(1, "a")).await;
        let alice = sign_in(&s, w.token("alice")).await;
        let q = get(&s, "/ui/queue", Some(&alice)).await;
        assert_eq!(q.status, 200, "{q:?}");
        assert!(
            !q.body.contains("/ui/reliability"),
            "a human is offered the page: {q:?}"
        );

        // Refused as every read out of the caller's role is: 403, the reason code, one denial.
        let before = head_seq(&w).await;
        let r = get(&s, "/ui/reliability", Some(&alice)).await;
        assert_eq!(r.status, 403, "{r:?}");
        assert_alert(&r, "permission_denied");
        assert!(!r.body.contains("data-capability"), "{r:?}");
        assert!(!r.body.contains("<svg role=\"img\""), "{r:?}");
        let after = events_after(&w, before).await;
        assert_eq!(after.len(), 1, "{after:?}");
        assert_eq!(after[0].table, "denials", "{after:?}");
        let denial = w.denials().await.pop().unwrap();
        assert_eq!(denial["principal"], "alice");
        assert_eq!(denial["code"], "permission_denied");

        // The API's ledger refuses every role but the operator's the same way.
        for who in ["alice", "coder", "ci", "rev"] {
            let before = head_seq(&w).await;
            let r = s.send("GET", "/v1/ledger", Some(w.token(who)), None).await;
            assert_denied_once(&w, before, &r, who, "permission_denied").await;
        }

        // The operator is offered and shown both.
        let ops = sign_in(&s, w.token("ops")).await;
        let r = get(&s, "/ui/reliability", Some(&ops)).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.body.contains("href=\"/ui/reliability\""), "{r:?}");
        assert!(r.body.contains("data-capability"), "{r:?}");
        let r = s
            .send("GET", "/v1/ledger", Some(w.token("ops")), None)
            .await;
        assert_eq!(r.status, 200, "{r:?}");
    })
    .await;
}

/// A person opens the review of a change that waits for them; before they submit, a runner
/// stores more evidence about the subject, so what the Gate would decide is no longer what the
/// page showed. The form carries the evaluation it showed: the approval is refused (409, the
/// alert), nothing is written, and the page shown again carries the current evaluation, from
/// which the approval is recorded and names exactly the reason it clears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_from_a_page_clears_only_what_the_page_showed() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        let sd = to_human_required(&w, &subject_of(EXEC, 1, "diff-1", "coder")).await;
        let alice = sign_in(&s, w.token("alice")).await;
        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        let shown = p.hidden("reviewed_decision");
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert_eq!(
            status
                .applicable
                .unwrap()
                .decision
                .evaluation_key
                .unwrap()
                .as_str(),
            shown,
            "the page carries the evaluation it shows"
        );

        let ci = w.engine.authenticate(w.token("ci")).await.unwrap();
        let mut more = evidence(sd.as_str(), "pass");
        more["id"] = json!("ev-later");
        w.engine.add_evidence(&ci, &[more]).await.unwrap();
        let before = head_seq(&w).await;
        let r = decide(&s, &alice, &p, "approve", "approved what I saw").await;
        assert_eq!(r.status, 409, "{r:?}");
        assert_alert(&r, "moved while this page was open");
        assert!(
            r.body.contains(&shown),
            "the alert names the evaluation shown"
        );
        assert_eq!(
            head_seq(&w).await,
            before,
            "a stale approval wrote something"
        );
        // Nothing applies now (evidence was added after the Gate ran): the page offers no
        // decision, only to run the Gate again.
        assert!(r.body.contains("id=\"decide-unavailable\""), "{}", r.body);
        assert!(!r.body.contains("name=\"reviewed_decision\""), "{}", r.body);
        let ran = post(
            &s,
            "/ui/executions/ex-1/gate-run",
            Some(&alice),
            &[("csrf", &r.hidden("csrf"))],
        )
        .await;
        assert_eq!(ran.status, 303, "{ran:?}");
        let r = get(&s, ran.location(), Some(&alice)).await;
        let current = r.hidden("reviewed_decision");
        assert_ne!(current, shown);

        let r = decide(&s, &alice, &r, "approve", "approved what I saw now").await;
        assert_eq!(r.status, 303, "{r:?}");
        let hd: Digest = r
            .location()
            .rsplit('=')
            .next()
            .unwrap()
            .replace("%3A", ":")
            .parse()
            .unwrap();
        let stored = w
            .engine
            .store()
            .get(verdict_store::DocKind::HumanDecision, &hd)
            .await
            .unwrap()
            .unwrap()
            .value()
            .unwrap();
        assert_eq!(stored["clears"], json!([{"code": "human_review_required"}]));
        let p = get(&s, r.location(), Some(&alice)).await;
        assert_eq!(p.outcome(), "pass");
    })
    .await;
}

/// A reason that arose after the Gate last ran is never cleared by an approval from a page that
/// did not show it. The Gate asks a person to review (a high-risk policy); then a second
/// reviewer's `inconclusive` on the required criterion is stored and nobody runs the Gate. The
/// page shows that no decision applies and offers no form; an approval posted anyway, naming no
/// evaluation, the one the page showed before, or the evaluation of now that no decision
/// records, is refused and writes nothing. Once the Gate has run, the page shows the new reason
/// and an approval clears exactly what it shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_never_clears_a_reason_the_page_did_not_show() {
    on_both(|store| async move {
        let (w, s) = setup(store).await;
        let sd = to_human_required(&w, &subject_of(EXEC, 1, "diff-1", "coder")).await;
        let alice = sign_in(&s, w.token("alice")).await;
        let before_page = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        assert!(before_page.body.contains("name=\"reviewed_decision\""));

        // A second reviewer answers inconclusive on the required criterion.
        let ops = &w.ops;
        let token = w
            .engine
            .add_principal(ops, "rev-2", verdict_core::contracts::Role::Verifier)
            .await
            .unwrap();
        w.engine
            .grant(
                ops,
                "g-rev-2",
                "rev-2",
                verdict_store::ScopeKind::Execution,
                EXEC,
                verdict_store::Access::Read,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        let rev2 = w.engine.authenticate(&token).await.unwrap();
        let req = w
            .engine
            .create_request(ops, EXEC, &json!({}))
            .await
            .unwrap();
        w.engine
            .admit(&rev2, &req, "rev-2", "reviewer", "run-rev-2")
            .await
            .unwrap();
        let subject: verdict_core::contracts::Subject = w
            .engine
            .store()
            .get(verdict_store::DocKind::Subject, &sd)
            .await
            .unwrap()
            .unwrap()
            .decode()
            .unwrap();
        let rows: Vec<Value> = subject
            .criteria
            .items
            .iter()
            .map(|c| json!({"id": c.id.as_str(), "status": "inconclusive", "method": "review", "evidence_refs": []}))
            .collect();
        let late = json!({
            "id": "vr-run-rev-2",
            "verifier": {"principal": "rev-2", "class": "reviewer", "run": "run-rev-2"},
            "subject_digest": sd.as_str(), "generation": 1, "status": "completed",
            "criteria": rows, "findings": [], "dispositions": []
        });
        assert!(w.engine.submit_result(&rev2, &late).await.unwrap().counted);

        let p = get(&s, "/ui/executions/ex-1", Some(&alice)).await;
        assert_eq!(p.outcome(), "none");
        assert!(p.body.contains("id=\"decide-unavailable\""), "{}", p.body);
        assert!(!p.body.contains("name=\"reviewed_decision\""), "{}", p.body);
        let collected = w.engine.collect(ops, EXEC).await.unwrap();
        let now = w.engine.now().await.unwrap();
        let unrecorded = verdict_core::gate::evaluate_value(&collected.bundle(&now).unwrap())
            .evaluation_key
            .unwrap();
        let before = head_seq(&w).await;
        for (key, status) in [
            (None, 422),
            (Some(before_page.hidden("reviewed_decision")), 409),
            (Some(unrecorded.to_string()), 409),
        ] {
            let mut form = vec![
                ("csrf", p.hidden("csrf")),
                ("subject_digest", before_page.hidden("subject_digest")),
                ("policy_digest", before_page.hidden("policy_digest")),
                ("verdict", "approve".to_owned()),
                ("reason", "looks fine".to_owned()),
            ];
            if let Some(k) = key.clone() {
                form.push(("reviewed_decision", k));
            }
            let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let r = post(&s, "/ui/executions/ex-1/decision", Some(&alice), &pairs).await;
            assert_eq!(r.status, status, "{key:?}: {r:?}");
            assert_eq!(head_seq(&w).await, before, "{key:?} wrote something");
        }
        assert_ne!(
            w.engine.status(ops, EXEC).await.unwrap().applicable.map(|a| a.decision.outcome.as_str().to_owned()),
            Some("pass".to_owned())
        );

        // The Gate runs: the page shows the new reason, and an approval clears what it shows.
        let ran = post(&s, "/ui/executions/ex-1/gate-run", Some(&alice), &[("csrf", &p.hidden("csrf"))]).await;
        assert_eq!(ran.status, 303, "{ran:?}");
        let p = get(&s, ran.location(), Some(&alice)).await;
        assert!(p.body.contains("criterion_inconclusive"), "{}", p.body);
        let r = decide(&s, &alice, &p, "approve", "reviewed the inconclusive criterion").await;
        assert_eq!(r.status, 303, "{r:?}");
        let hd: Digest = r.location().rsplit('=').next().unwrap().replace("%3A", ":").parse().unwrap();
        let stored = w
            .engine
            .store()
            .get(verdict_store::DocKind::HumanDecision, &hd)
            .await
            .unwrap()
            .unwrap()
            .value()
            .unwrap();
        let cleared: Vec<&str> = stored["clears"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["code"].as_str().unwrap())
            .collect();
        assert!(cleared.contains(&"criterion_inconclusive"), "{stored}");
    })
    .await;
}
