//! `GET /v1/events` over real HTTP, each body on SQLite and on PostgreSQL: a gate decision
//! appears in the stream with its audit seq as its id, a client resumes after the last id it
//! saw, a principal out of scope never sees another execution's events, and streams end when
//! the server stops.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;
use verdict_core::digest::{DigestKind, digest};
use verdict_server::AppState;
use verdict_server::events::EventTiming;
use verdict_store::{Access, ScopeKind};

/// One Server-Sent Event as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub id: u64,
    pub event: String,
    pub data: Value,
}

/// An open event stream, read frame by frame.
pub struct Stream {
    resp: reqwest::Response,
    buf: String,
}

impl Stream {
    pub async fn open(s: &Server, token: &str, query: &str, last_id: Option<u64>) -> Self {
        let mut req = s
            .client
            .get(format!("{}/v1/events{query}", s.base))
            .bearer_auth(token);
        if let Some(id) = last_id {
            req = req.header("last-event-id", id.to_string());
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200, "{resp:?}");
        assert_eq!(
            resp.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Self {
            resp,
            buf: String::new(),
        }
    }

    /// The next event, or `None` when the stream ended; panics after `wait` with no event.
    pub async fn next(&mut self, wait: Duration) -> Option<Received> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                let frame: String = self.buf.drain(..end + 2).collect();
                if let Some(event) = parse(&frame) {
                    return Some(event);
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk())
                .await
                .expect("no event in time")
                .unwrap();
            match chunk {
                Some(bytes) => self.buf.push_str(std::str::from_utf8(&bytes).unwrap()),
                None => return None,
            }
        }
    }

    /// Every event until the response ends.
    pub async fn all(mut self) -> Vec<Received> {
        let mut out = Vec::new();
        while let Some(e) = self.next(Duration::from_secs(20)).await {
            out.push(e);
        }
        out
    }

    /// Events until one of type `kind`, which is returned with those before it.
    pub async fn until(&mut self, kind: &str) -> Vec<Received> {
        let mut out = Vec::new();
        loop {
            let e = self
                .next(Duration::from_secs(20))
                .await
                .expect("the stream ended");
            let done = e.event == kind;
            out.push(e);
            if done {
                return out;
            }
        }
    }
}

/// An event frame's fields; a frame of comments only (a keep-alive) is none.
fn parse(frame: &str) -> Option<Received> {
    let (mut id, mut event, mut data) = (None, None, String::new());
    for line in frame.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().parse().unwrap());
        } else if let Some(v) = line.strip_prefix("event:") {
            event = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        }
    }
    Some(Received {
        id: id?,
        event: event.unwrap(),
        data: serde_json::from_str(&data).unwrap(),
    })
}

/// State whose streams poll often, so a test waits milliseconds, not seconds.
pub fn fast(w: &World) -> AppState {
    AppState {
        events: EventTiming {
            poll: Duration::from_millis(50),
            keep_alive: Duration::from_millis(200),
        },
        ..AppState::new(w.engine.clone())
    }
}

/// The seq of the last audit event appended to `table`.
async fn last_seq_of(w: &World, table: &str) -> u64 {
    events_after(w, 0)
        .await
        .iter()
        .rev()
        .find(|e| e.table == table)
        .unwrap()
        .seq
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_client_sees_a_gate_decision_and_resumes_after_the_last_id() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(fast(&w)).await;
        let (ops, coder) = (w.token("ops"), w.token("coder"));
        let doc = subject(1, "diff-1");
        let sd = digest(DigestKind::Subject, &doc);
        let r = s
            .send("POST", "/v1/subjects", Some(coder), Some(&doc))
            .await;
        assert_eq!(r.status, 201, "{r:?}");

        // Opened before the gate run: the decision must arrive while the client waits.
        let start = head_seq(&w).await;
        let mut stream = Stream::open(&s, ops, &format!("?after={start}"), None).await;
        let r = s
            .send("POST", "/v1/executions/ex-1/gate-runs", Some(ops), None)
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let decision = r.body["decision"].clone();
        let seen = stream.until("gate_decision").await;
        let got = seen.last().unwrap();
        assert!(seen.iter().all(|e| e.id > start), "{seen:?}");
        let seq = last_seq_of(&w, "gate_decisions").await;
        assert_eq!(got.id, seq);
        assert_eq!(got.data["seq"], seq);
        assert_eq!(got.data["type"], "gate_decision");
        assert_eq!(got.data["execution"], EXEC);
        assert_eq!(got.data["subject_digest"], sd.as_str());
        assert_eq!(got.data["outcome"], decision["outcome"]);
        assert_eq!(got.data["evaluation_key"], decision["evaluation_key"]);
        let codes: Vec<Value> = decision["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["code"].clone())
            .collect();
        assert!(!codes.is_empty());
        assert_eq!(got.data["reasons"], Value::Array(codes));
        let stored = w
            .engine
            .store()
            .decision_by_key(
                &decision["evaluation_key"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.data["decision_digest"], stored.digest.as_str());

        // Resuming with the last id gets only what came after it: nothing yet, then the
        // subject's move.
        let resumed = Stream::open(&s, ops, "?wait=false", Some(seq))
            .await
            .all()
            .await;
        assert!(resumed.is_empty(), "{resumed:?}");
        let doc2 = subject(2, "diff-2");
        let r = s
            .send("POST", "/v1/subjects", Some(coder), Some(&doc2))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        // Last-Event-ID wins over `after`, as a reconnecting EventSource sends both.
        let resumed = Stream::open(&s, ops, "?wait=false&after=0", Some(seq))
            .await
            .all()
            .await;
        assert_eq!(resumed.len(), 1, "{resumed:?}");
        assert_eq!(resumed[0].event, "subject_moved");
        assert!(resumed[0].id > seq);
        assert_eq!(resumed[0].data["generation"], 2);
        assert_eq!(resumed[0].data["previous"], sd.as_str());
        let again = stream.until("subject_moved").await;
        assert_eq!(again.last().unwrap().id, resumed[0].id);

        // From the start: every event once, in seq order.
        let all = Stream::open(&s, ops, "?wait=false", None).await.all().await;
        let ids: Vec<u64> = all.iter().map(|e| e.id).collect();
        assert!(ids.windows(2).all(|p| p[0] < p[1]), "{ids:?}");
        assert!(ids.contains(&seq));

        // Stopping the server ends the open stream instead of holding the shutdown.
        drop(s);
        let end = stream.next(Duration::from_secs(10)).await;
        assert!(end.is_none(), "{end:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_out_of_scope_never_sees_another_executions_events() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(fast(&w)).await;
        let ops = w.token("ops");
        let rev2 = w
            .engine
            .add_principal(
                &w.ops,
                "rev2",
                serde_json::from_value(json!("verifier")).unwrap(),
            )
            .await
            .unwrap();
        w.engine
            .grant(
                &w.ops,
                "g-rev2",
                "rev2",
                ScopeKind::Execution,
                "ex-2",
                Access::Read,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        let mut other = subject(1, "other");
        other["execution"]["id"] = json!("ex-2");
        for doc in [subject(1, "mine"), other] {
            let r = s.send("POST", "/v1/subjects", Some(ops), Some(&doc)).await;
            assert_eq!(r.status, 201, "{r:?}");
        }
        for ex in [EXEC, "ex-2"] {
            let r = s
                .send(
                    "POST",
                    &format!("/v1/executions/{ex}/gate-runs"),
                    Some(ops),
                    None,
                )
                .await;
            assert_eq!(r.status, 201, "{r:?}");
        }
        let r = s
            .send(
                "POST",
                "/v1/executions/ex-2/cancel",
                Some(ops),
                Some(&json!({"reason": "stop"})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");

        let executions = |events: &[Received]| {
            let mut ex: Vec<String> = events
                .iter()
                .map(|e| e.data["execution"].as_str().unwrap().to_owned())
                .collect();
            ex.sort();
            ex.dedup();
            ex
        };
        let before = head_seq(&w).await;
        let everything = Stream::open(&s, ops, "?wait=false", None).await.all().await;
        let kinds: Vec<&str> = everything.iter().map(|e| e.event.as_str()).collect();
        assert!(kinds.contains(&"execution_cancelled"), "{kinds:?}");
        assert_eq!(executions(&everything), [EXEC, "ex-2"]);

        let mine = Stream::open(&s, w.token("rev"), "?wait=false", None)
            .await
            .all()
            .await;
        assert_eq!(executions(&mine), [EXEC], "{mine:?}");
        assert_eq!(
            mine.iter().filter(|e| e.event == "gate_decision").count(),
            1
        );
        let theirs = Stream::open(&s, &rev2, "?wait=false", None)
            .await
            .all()
            .await;
        assert_eq!(executions(&theirs), ["ex-2"], "{theirs:?}");
        assert!(theirs.iter().any(|e| e.event == "execution_cancelled"));
        // Filtering is a listing, not a refusal: reading the stream wrote nothing.
        assert_eq!(head_seq(&w).await, before);

        // A waiting stream out of scope stays silent while the other execution moves; once
        // the grant is revoked, nothing more of ex-2 reaches rev2 either.
        let mut waiting = Stream::open(&s, &rev2, &format!("?after={before}"), None).await;
        let r = s
            .send(
                "POST",
                "/v1/subjects",
                Some(ops),
                Some(&subject(2, "mine-2")),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        w.engine.revoke(&w.ops, "g-rev2", "done").await.unwrap();
        let after = Stream::open(&s, &rev2, "?wait=false", None)
            .await
            .all()
            .await;
        assert!(after.is_empty(), "{after:?}");
        drop(s);
        assert!(waiting.next(Duration::from_secs(10)).await.is_none());

        // Without a token: 401, recorded like any other.
        let s = serve(fast(&w)).await;
        let r = s.send("GET", "/v1/events?wait=false", None, None).await;
        assert_problem(&r, 401, "unauthenticated");
        let r = s
            .send("GET", "/v1/events?wait=false&limit=0", Some(ops), None)
            .await;
        assert_problem(&r, 400, "invalid_query");
        let r = s
            .send_headers(
                "GET",
                "/v1/events?wait=false",
                Some(ops),
                None,
                &[("last-event-id", "x")],
            )
            .await;
        assert_problem(&r, 400, "invalid_query");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_id_past_the_stores_range_is_refused_by_the_route() {
    on_both(|store| async move {
        let w = world(store).await;
        let s = serve(fast(&w)).await;
        let ops = w.token("ops");
        // Under the attack, these reached the store and came back as its 422.
        for query in [
            "?wait=false&after=18446744073709551615",
            "?wait=false&after=9223372036854775808",
        ] {
            let r = s
                .send("GET", &format!("/v1/events{query}"), Some(ops), None)
                .await;
            assert_problem(&r, 400, "invalid_query");
            assert!(
                r.body["detail"]
                    .as_str()
                    .unwrap()
                    .starts_with("after must be an event id"),
                "{r:?}"
            );
        }
        for id in ["9223372036854775808", "18446744073709551615", "-1"] {
            let r = s
                .send_headers(
                    "GET",
                    "/v1/events?wait=false",
                    Some(ops),
                    None,
                    &[("last-event-id", id)],
                )
                .await;
            assert_problem(&r, 400, "invalid_query");
            assert!(
                r.body["detail"]
                    .as_str()
                    .unwrap()
                    .starts_with("Last-Event-ID must be an event id"),
                "{id}: {r:?}"
            );
        }
        // The largest id the store can hold is read: nothing comes after it.
        let last = Stream::open(&s, ops, "?wait=false", Some(i64::MAX.unsigned_abs()))
            .await
            .all()
            .await;
        assert!(last.is_empty(), "{last:?}");
        let last = Stream::open(&s, ops, "?wait=false&after=9223372036854775807", None)
            .await
            .all()
            .await;
        assert!(last.is_empty(), "{last:?}");
    })
    .await;
}

/// Rewrites a stored human decision to say `"maybe"`, as whoever can switch the append-only
/// triggers off (the file's holder, a superuser) can: what no write path of verdict stores.
async fn plant_maybe(backing: &Backing) {
    let set = "UPDATE human_decisions SET body = replace(body, '\"decision\":\"reject\"', \
               '\"decision\":\"maybe\"')";
    match backing {
        Backing::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).unwrap();
            let triggers: Vec<(String, String)> = conn
                .prepare(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' \
                     AND tbl_name = 'human_decisions'",
                )
                .unwrap()
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let drops: String = triggers
                .iter()
                .map(|(n, _)| format!("DROP TRIGGER {n};"))
                .collect();
            let creates: String = triggers.iter().map(|(_, s)| format!("{s};")).collect();
            conn.execute_batch(&format!("BEGIN; {drops} {set}; {creates} COMMIT;"))
                .unwrap();
        }
        Backing::Postgres(url) => {
            use sqlx::{Connection as _, Executor as _};
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            conn.execute(sqlx::AssertSqlSafe(format!(
                "BEGIN; SET LOCAL session_replication_role = replica; \
                 SET LOCAL search_path = verdict; {set}; COMMIT;"
            )))
            .await
            .unwrap();
            conn.close().await.unwrap();
        }
    }
}

/// A stored record that does not decode is an event of its own, naming its table, key and
/// digest; the events before and after it still stream, for an operator and for a principal
/// in scope alike; the Gate still refuses to decide on it, naming the record; `audit verify`
/// reports it. Each store is damaged on purpose, so its chain is checked to report the damage
/// instead of to be intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_record_that_does_not_decode_is_named_and_the_stream_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("verdict.db");
    let sqlite = verdict_store::open(&verdict_store::Location::Sqlite(path.clone()))
        .await
        .unwrap();
    let scratch = verdict_store::scratch::ScratchPostgres::create("serverd").unwrap();
    let options = verdict_store::OpenOptions {
        role_prefix: Some(scratch.role_prefix()),
        max_connections: 4,
        ..verdict_store::OpenOptions::default()
    };
    let postgres = verdict_store::open_with(&scratch.location(), &options)
        .await
        .unwrap();
    for (store, backing) in [
        (sqlite, Backing::Sqlite(path.clone())),
        (postgres, Backing::Postgres(scratch.url().to_owned())),
    ] {
        let w = world(store.clone()).await;
        let s = serve(fast(&w)).await;
        let (ops, coder, alice) = (w.token("ops"), w.token("coder"), w.token("alice"));
        let doc = subject(1, "diff-1");
        let sd = digest(DigestKind::Subject, &doc);
        let r = s
            .send("POST", "/v1/subjects", Some(coder), Some(&doc))
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s
            .send("POST", "/v1/executions/ex-1/gate-runs", Some(ops), None)
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let r = s
            .send("GET", "/v1/executions/ex-1/status", Some(alice), None)
            .await;
        let policy = r.body["gate"]["policy_digest"].as_str().unwrap().to_owned();
        let r = s
            .send(
                "POST",
                "/v1/human-decisions",
                Some(alice),
                Some(&json!({
                    "execution": EXEC,
                    "decision": "reject",
                    "reason": "read it",
                    "subject_digest": sd.as_str(),
                    "policy_digest": policy,
                })),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
        let key = r.body["digest"].as_str().unwrap().to_owned();
        let bad_seq = last_seq_of(&w, "human_decisions").await;
        plant_maybe(&backing).await;

        // The Gate does not decide on a record it cannot read, and says which one it is.
        let r = s
            .send("POST", "/v1/executions/ex-1/gate-runs", Some(ops), None)
            .await;
        assert!(r.status >= 400, "{r:?}");
        let said = r.body.to_string();
        assert!(
            said.contains("human_decisions") && said.contains(&key),
            "{said}"
        );
        // Something recorded after the bad record.
        let r = s
            .send(
                "POST",
                "/v1/subjects",
                Some(coder),
                Some(&subject(2, "diff-2")),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");

        for token in [ops, alice] {
            let all = Stream::open(&s, token, "?wait=false", None)
                .await
                .all()
                .await;
            let kinds: Vec<&str> = all.iter().map(|e| e.event.as_str()).collect();
            assert_eq!(
                kinds,
                [
                    "subject_moved",
                    "gate_decision",
                    "undecodable_record",
                    "subject_moved"
                ],
                "{all:?}"
            );
            let bad = &all[2];
            assert_eq!(bad.id, bad_seq);
            assert_eq!(bad.data["table"], "human_decisions");
            assert_eq!(bad.data["key"], key.as_str());
            assert_eq!(bad.data["digest"], key.as_str());
            assert_eq!(bad.data["execution"], EXEC);
            assert!(
                bad.data["error"].as_str().unwrap().contains("maybe"),
                "{bad:?}"
            );
            assert_eq!(all[3].data["generation"], 2);
        }

        let report = store.verify_audit(None).await.unwrap();
        assert!(!report.is_intact());
        assert!(
            report
                .problems
                .iter()
                .any(|p| format!("{p:?}").contains("human_decisions")),
            "{:#?}",
            report.problems
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_token_is_revoked_or_rotated_ends_and_is_sent_nothing_more() {
    on_both(|store| async move {
        let w = world(store).await;
        let operator = serde_json::from_value(json!("operator")).unwrap();
        let revoked = w
            .engine
            .add_principal(&w.ops, "ops-revoked", operator)
            .await
            .unwrap();
        let rotated = w
            .engine
            .add_principal(&w.ops, "ops-rotated", operator)
            .await
            .unwrap();
        let s = serve(fast(&w)).await;
        let (ops, coder) = (w.token("ops"), w.token("coder"));
        let r = s
            .send("POST", "/v1/subjects", Some(coder), Some(&subject(1, "d")))
            .await;
        assert_eq!(r.status, 201, "{r:?}");

        // Three operators' streams, all open and caught up.
        let start = head_seq(&w).await;
        let q = format!("?after={start}");
        let mut valid = Stream::open(&s, ops, &q, None).await;
        let cut_by_revoke = Stream::open(&s, &revoked, &q, None).await;
        let cut_by_rotate = Stream::open(&s, &rotated, &q, None).await;

        let r = s
            .send(
                "POST",
                "/v1/principals/ops-revoked/token/revoke",
                Some(ops),
                Some(&json!({})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        // Rotated by its holder, whose new token goes on working.
        let r = s
            .send(
                "POST",
                "/v1/principals/ops-rotated/token/rotate",
                Some(&rotated),
                Some(&json!({})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let fresh = r.body["token"].as_str().unwrap().to_owned();
        let mut renewed = Stream::open(&s, &fresh, &q, None).await;

        // An event every operator may read, caused by another operator.
        let r = s
            .send(
                "POST",
                &format!("/v1/executions/{EXEC}/cancel"),
                Some(ops),
                Some(&json!({"reason": "after the revocation"})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let seen = valid.until("execution_cancelled").await;
        assert_eq!(seen.last().unwrap().data["execution"], EXEC);
        renewed.until("execution_cancelled").await;

        // The streams of the old tokens end (`all` fails a stream still open after 20 s)
        // without it.
        for (name, stream) in [("revoked", cut_by_revoke), ("rotated", cut_by_rotate)] {
            let got = stream.all().await;
            assert!(
                got.iter().all(|e| e.event != "execution_cancelled"),
                "{name}: {got:?}"
            );
        }
        // And the old tokens open nothing.
        for token in [&revoked, &rotated] {
            let r = s
                .send("GET", "/v1/events?wait=false", Some(token), None)
                .await;
            assert_problem(&r, 401, "unauthenticated");
        }
    })
    .await;
}
