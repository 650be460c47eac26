//! The world the review pages are tested over, built through the engine before the server
//! starts: an operator, a producer, a runner, a verifier, three people (`reviewer`; `hana`,
//! who is named as the producer of one subject; `idle`, with no grant), mission grants, a policy that sends high-risk
//! work to a person, and executions whose gate says `human_required`.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use verdict_core::digest::{Digest, DigestKind, digest};
use verdict_engine::{Engine, Principal, Reviewed};
use verdict_server::AppState;
use verdict_store::{Access, Location, OpenOptions, ScopeKind, Store, Table};

/// The gate the server decides for.
pub const GATE: &str = "merge";
/// The mission every seeded execution belongs to; every grant is on it.
pub const MISSION: &str = "m-review";
/// A definition and content digest the documents pin.
pub const DEF: &str = "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86";

/// Executions the `reviewer` approves, rejects, finds moved under an open page, and posts
/// without the CSRF token; `hana`'s own work; and one whose first subject was sent back for
/// rework before its second reached a person (so it has a lineage). Seeded in this order,
/// each gated once, so the queue lists them in this order (oldest first).
pub const APPROVE: &str = "ex-approve";
pub const REJECT: &str = "ex-reject";
pub const STALE: &str = "ex-stale";
pub const CSRF: &str = "ex-csrf";
pub const HANA: &str = "ex-hana";
pub const MOVED: &str = "ex-moved";
pub const QUEUE: [&str; 6] = [APPROVE, REJECT, STALE, CSRF, HANA, MOVED];

/// The engine, the principals the tests act as through it, and every principal's token.
pub struct World {
    pub engine: Engine,
    pub ops: Principal,
    pub coder: Principal,
    pub ci: Principal,
    pub rev: Principal,
    tokens: BTreeMap<&'static str, String>,
    runs: std::sync::atomic::AtomicU32,
}

impl World {
    /// The token of a seeded principal.
    pub fn token(&self, name: &str) -> &str {
        self.tokens.get(name).map_or_else(
            || panic!("no principal {name:?} was seeded"),
            String::as_str,
        )
    }

    /// The outcome of the decision that applies to `execution` now, or `none`, read as the
    /// operator.
    pub async fn outcome(&self, execution: &str) -> String {
        let status = self.engine.status(&self.ops, execution).await.unwrap();
        status.applicable.map_or_else(
            || "none".to_owned(),
            |d| d.decision.outcome.as_str().to_owned(),
        )
    }

    /// Every stored human decision, as JSON.
    pub async fn human_decisions(&self) -> Vec<Value> {
        self.engine
            .store()
            .rows(Table::HumanDecisions, 0, 10_000)
            .await
            .unwrap()
            .iter()
            .map(|s| s.value().unwrap())
            .collect()
    }

    /// The audit chain's head seq (0 when empty).
    pub async fn head_seq(&self) -> u64 {
        self.engine
            .store()
            .audit_head()
            .await
            .unwrap()
            .map_or(0, |h| h.seq)
    }

    /// The tables of the audit events appended after `seq`.
    pub async fn tables_written_after(&self, seq: u64) -> Vec<String> {
        self.engine
            .store()
            .audit_events(seq, 10_000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.table)
            .collect()
    }

    /// The execution's current subject digest.
    pub async fn subject_of(&self, execution: &str) -> Digest {
        self.engine
            .execution_head(&self.ops, execution)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{execution} has no subject"))
            .subject_digest
    }

    /// The producer puts a new subject for `execution` at `generation`, with checks and a
    /// reviewer's result, and the gate runs: the subject moves, as it would while a person
    /// had the old one open.
    pub async fn move_subject(&self, execution: &str, generation: u64) -> Digest {
        self.walk(execution, generation, "coder", "moved", Review::Pass)
            .await
    }

    /// Puts the high-risk subject of `execution` at `generation` by `producer` with its
    /// `change` (as its producer, or as the operator when the producer is not `coder`), adds
    /// the runner's passing check evidence, has the reviewer verify it as `review` says, and
    /// runs the gate. Returns the subject's digest.
    async fn walk(
        &self,
        execution: &str,
        generation: u64,
        producer: &str,
        change: &str,
        review: Review,
    ) -> Digest {
        let doc = &subject(execution, generation, producer, "high", change);
        let putter = if producer == "coder" {
            &self.coder
        } else {
            &self.ops
        };
        // The producer stores the diff its subject names, so the page shows it (an operator's
        // subject for someone else names bytes nobody stored: the page shows its digest).
        if producer == "coder" {
            let bytes = diff(execution, generation, change);
            let d = verdict_core::digest::raw(bytes.as_bytes());
            self.engine
                .put_blob(&self.coder, d.as_str(), bytes.as_bytes(), None)
                .await
                .unwrap();
        }
        let sd = self.engine.put_subject(putter, doc).await.unwrap();
        assert_eq!(sd, digest(DigestKind::Subject, doc));
        let ev = evidence(&sd, "pass");
        self.engine
            .add_evidence(&self.ci, std::slice::from_ref(&ev))
            .await
            .unwrap();
        let req = self
            .engine
            .create_request(&self.ops, execution, &json!({}))
            .await
            .unwrap();
        let n = self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let run = format!("run-{n}");
        let pre = self
            .engine
            .admit(&self.ops, &req, "rev", "reviewer", &run)
            .await
            .unwrap();
        assert!(!pre.skipped, "{pre:?}");
        let submitted = self
            .engine
            .submit_result(
                &self.rev,
                &result(&run, &sd, generation, ev["id"].as_str().unwrap(), review),
            )
            .await
            .unwrap();
        assert!(submitted.counted, "{submitted:?}");
        self.engine.gate_run(&self.ops, execution).await.unwrap();
        sd
    }

    /// What a person names when deciding on `execution` now.
    pub async fn reviewed(&self, execution: &str) -> Reviewed {
        let status = self.engine.status(&self.ops, execution).await.unwrap();
        Reviewed {
            subject_digest: status.head.unwrap().subject_digest,
            policy_digest: status.gate.unwrap().policy_digest,
            decision_key: None,
        }
    }
}

/// Seeds `store` (see the module's documentation). Every seeded execution but `ex-moved`'s
/// first subject ends `human_required`.
pub async fn seed(store: Arc<dyn Store>) -> World {
    let engine = Engine::new(store, GATE);
    let mut tokens = BTreeMap::new();
    let ops_token = engine
        .init("ops", verdict_store::StoreClock::System)
        .await
        .unwrap();
    let ops = engine.authenticate(&ops_token).await.unwrap();
    tokens.insert("ops", ops_token);
    for (name, role, access) in [
        ("coder", "producer", Access::Write),
        ("ci", "runner", Access::Write),
        ("rev", "verifier", Access::Read),
        ("reviewer", "human", Access::Write),
        ("hana", "human", Access::Write),
    ] {
        let role = serde_json::from_value(json!(role)).unwrap();
        let token = engine.add_principal(&ops, name, role).await.unwrap();
        engine
            .grant(
                &ops,
                &format!("g-{name}"),
                name,
                ScopeKind::Mission,
                MISSION,
                access,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        tokens.insert(name, token);
    }
    // A person with no grant at all: the queue they see is empty.
    let idle = engine
        .add_principal(
            &ops,
            "idle",
            serde_json::from_value(json!("human")).unwrap(),
        )
        .await
        .unwrap();
    tokens.insert("idle", idle);
    engine.set_policy(&ops, &policy()).await.unwrap();
    let auth = |name: &str| {
        let engine = engine.clone();
        let token = tokens[name].clone();
        async move { engine.authenticate(&token).await.unwrap() }
    };
    let world = World {
        coder: auth("coder").await,
        ci: auth("ci").await,
        rev: auth("rev").await,
        engine: engine.clone(),
        ops,
        tokens,
        runs: std::sync::atomic::AtomicU32::new(1),
    };
    for execution in [APPROVE, REJECT, STALE, CSRF] {
        world
            .walk(execution, 1, "coder", "first", Review::Pass)
            .await;
    }
    // An operator puts a subject naming any producer: here a person who will also review.
    world.walk(HANA, 1, "hana", "first", Review::Pass).await;
    // The reviewer finds a blocker in the first subject (rework); the second resolves it and
    // reaches a person.
    world
        .walk(MOVED, 1, "coder", "first", Review::Blocker)
        .await;
    assert_eq!(world.outcome(MOVED).await, "rework");
    world
        .walk(MOVED, 2, "coder", "second", Review::Resolves)
        .await;
    for execution in QUEUE {
        assert_eq!(
            world.outcome(execution).await,
            "human_required",
            "{execution}"
        );
    }
    world
}

/// The gate's policy: unit tests and a reviewer for everything; a person too for high risk.
pub fn policy() -> Value {
    json!({
        "schema": "verdict.policy/v1",
        "name": GATE,
        "revision": 1,
        "required_checks": ["unit-tests"],
        "required_verifiers": ["reviewer"],
        "risk": {"high": {"human": true}},
    })
}

/// The diff a subject names: a hunk whose added and removed lines look like file headers, one
/// whose carriage return would hide its start, and a right-to-left override, which the page
/// must draw as they are. `change` makes it the subject's own.
pub fn diff(execution: &str, generation: u64, change: &str) -> String {
    format!(
        "diff --git a/src/retry.rs b/src/retry.rs\n--- a/src/retry.rs\n+++ b/src/retry.rs\n\
         @@ -1,3 +1,5 @@\n // {execution} {generation} {change}\n--- a/src/retry.rs\n+++ b/evil\n\
         +    return true; // \rretry up to three times\n+let user = \"admin\u{202E} \u{2066}// not admin\u{2069} \u{2066}\";\n fn retry() {{}}\n"
    )
}

/// A subject of `execution` at `generation` by `producer`; `change` names its content.
pub fn subject(
    execution: &str,
    generation: u64,
    producer: &str,
    risk: &str,
    change: &str,
) -> Value {
    let diff = diff(execution, generation, change);
    json!({
        "schema": "verdict.subject/v1",
        "mission": MISSION,
        "execution": {"id": execution, "generation": generation},
        "work_items": [{"kind": "work_package", "id": "wp-1", "version": "1"}],
        "producer": {"principal": producer, "run": format!("run-{producer}")},
        "objective": {"revision": "obj-1", "digest": DEF},
        "criteria": {"revision": "c-1", "items": [{"id": "tests-pass", "text": "unit tests pass"}]},
        "resources": [{"name": "diff", "kind": "git_diff", "digest": verdict_core::digest::raw(diff.as_bytes()).as_str()}],
        "checks": [{"id": "unit-tests", "definition_digest": DEF, "criteria": ["tests-pass"]}],
        "workflow_revision": "wf-1",
        "risk": {"class": risk, "revision": "r-1", "capabilities": []}
    })
}

/// The runner's check evidence about a subject.
fn evidence(subject: &Digest, outcome: &str) -> Value {
    json!({
        "id": format!("ev-{}-{outcome}", &subject.as_str()[7..19]),
        "kind": "check",
        "check": "unit-tests",
        "subject_digest": subject.as_str(),
        "definition_digest": DEF,
        "produced_by": {"principal": "ci", "role": "runner"},
        "outcome": outcome,
        "content_digest": DEF,
        "observed_at": "2026-11-30T11:59:00Z",
        "freshness": {"kind": "content"}
    })
}

/// What the reviewer says about a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Review {
    /// `tests-pass` passed.
    Pass,
    /// `tests-pass` failed, with a blocking finding and a pre-existing one to follow up.
    Blocker,
    /// `tests-pass` passed, and the earlier subject's blocker is resolved.
    Resolves,
}

/// The id of the blocker [`Review::Blocker`] reports.
const BLOCKER: &str = "f-retry-loop";

/// The reviewer's result for a run, on the given evidence.
fn result(run: &str, subject: &Digest, generation: u64, ev_id: &str, review: Review) -> Value {
    let status = if review == Review::Blocker {
        "failed"
    } else {
        "passed"
    };
    let findings = if review == Review::Blocker {
        json!([
            {
                "id": BLOCKER, "version": 1, "criterion": "tests-pass",
                "type": "behaviour_change", "severity": "blocker", "scope": "change",
                "subject_digest": subject.as_str(),
                "location": {"resource": "diff", "path": "src/retry.rs", "line": 42},
                "evidence_refs": ["diff"], "method": "review",
                "remediation": "bound the retry loop; callers expect at most three attempts"
            },
            {
                "id": "f-old-timeout", "version": 1, "criterion": "tests-pass",
                "type": "tech_debt", "severity": "major", "scope": "pre_existing",
                "subject_digest": subject.as_str(),
                "location": {"resource": "diff", "path": "src/client.rs"},
                "evidence_refs": ["diff"], "method": "review"
            }
        ])
    } else {
        json!([])
    };
    let dispositions = if review == Review::Resolves {
        json!([{"finding": BLOCKER, "version": 1, "disposition": "resolved", "evidence_refs": [ev_id]}])
    } else {
        json!([])
    };
    json!({
        "id": format!("vr-{run}"),
        "verifier": {"principal": "rev", "class": "reviewer", "run": run},
        "subject_digest": subject.as_str(),
        "generation": generation,
        "status": "completed",
        "criteria": [{"id": "tests-pass", "status": status, "method": "review", "evidence_refs": [ev_id]}],
        "findings": findings,
        "dispositions": dispositions
    })
}

/// A fresh SQLite store in a temporary directory (kept alive by the returned guard).
pub async fn sqlite() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = verdict_store::open(&Location::Sqlite(dir.path().join("verdict.db")))
        .await
        .unwrap();
    (store, dir)
}

/// A fresh PostgreSQL database (dropped with the returned guard).
pub async fn postgres() -> (Arc<dyn Store>, verdict_store::scratch::ScratchPostgres) {
    let scratch = verdict_store::scratch::ScratchPostgres::create("browser").unwrap();
    let options = OpenOptions {
        role_prefix: Some(scratch.role_prefix()),
        max_connections: 4,
        ..OpenOptions::default()
    };
    let store = verdict_store::open_with(&scratch.location(), &options)
        .await
        .unwrap();
    (store, scratch)
}

/// The server `verdict serve` runs, over the world's engine, on a loopback port; stopped
/// when dropped.
pub struct Server {
    /// `http://127.0.0.1:PORT`, the only origin the browser may reach.
    pub origin: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts the server over `engine`.
pub async fn serve(engine: Engine) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        verdict_server::serve(listener, AppState::new(engine), async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Server {
        origin: format!("http://{addr}"),
        stop: Some(stop),
    }
}
