//! `verdict quickstart`: one real change walked through the whole flow in the given store, as a
//! face over the engine's use cases (each step is one engine call, acting as one principal).
//!
//! A tiny greeting service runs in-process on a loopback port. Version 1 echoes a name into
//! HTML unescaped; version 2 escapes it. The flow acts as each principal in turn: the producer
//! puts subject A, the runner checks the live service with verdict-probes, a scripted verifier
//! (it probes the service itself; no model is involved) finds the injection and files a
//! blocker, the Gate sends the change to rework; the producer deploys the fix as subject B,
//! the checks run again, the verifier resolves the prior blocker, and the Gate passes it.

use async_trait::async_trait;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use verdict_core::contracts::{GateDecision, Name, Role};
use verdict_engine::{Engine, EngineError, ModelVerifier, Result, RunOutcome, VerifyTask};
use verdict_probes::{evidence, load, runner};
use verdict_store::{Access, ScopeKind, StoreClock};

/// The checks of the example, run from the outside against the live service.
const SPEC: &str = r#"
version: 1
vars: {port: "0"}
defaults: {timeout: 5s, interval: 100ms, probe_timeout: 2s, max_age: 10m}
criteria:
  - id: healthz-ok
    description: the health endpoint answers 200 with "ok"
    probe: {kind: http, url: "http://127.0.0.1:{{port}}/healthz", status: 200, body: {equals: ok}}
  - id: greets-by-name
    description: the greeting names the caller
    probe: {kind: http, url: "http://127.0.0.1:{{port}}/greet?name=ada", status: 200, body: {contains: ada}}
"#;

/// What the quickstart left in the store.
#[derive(Debug, Clone)]
pub struct Quickstart {
    /// The execution it created.
    pub execution: String,
    /// The first decision (rework) and the last (pass).
    pub decisions: Vec<GateDecision>,
    /// The token of the operator it created when it initialised the store (shown once).
    pub operator_token: Option<String>,
}

/// The gate the quickstart sets its policy on.
pub const GATE: &str = "quickstart";

/// Walks one change through the flow, printing each step with `say`. Each run creates its own
/// principals and a new execution. On an empty store it initialises the store first (system
/// clock) and returns the new operator's token; on an initialised one it needs an operator's
/// token, since only an operator adds principals. `engine` acts for gate [`GATE`].
pub async fn run(
    engine: &Engine,
    operator_token: Option<&str>,
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<Quickstart> {
    let (ops, operator_token) = match operator_token {
        Some(token) => (engine.authenticate(token).await?, None),
        None => {
            let token = engine
                .init("qs-operator", StoreClock::System)
                .await
                .map_err(|e| match e.code() {
                    // Say what to do instead of which pointer refused the second init.
                    "conflict" => EngineError::Conflict(
                        "this store is already initialised: run the quickstart with its \
                         operator's token (--token or VERDICT_TOKEN), or on an empty store \
                         (another VERDICT_HOME or --store)"
                            .into(),
                    ),
                    _ => e,
                })?;
            (engine.authenticate(&token).await?, Some(token))
        }
    };
    if ops.role() != Role::Operator {
        return Err(EngineError::PermissionDenied {
            principal: ops.name().to_string(),
            role: ops.role().as_str(),
            action: "run the quickstart".into(),
            why: "it adds principals, which only an operator may".into(),
        });
    }
    let taken: Vec<String> = engine
        .list_principals(&ops)
        .await?
        .into_iter()
        .map(|p| p.name.to_string())
        .collect();
    let mut n = 1_u32;
    while taken.contains(&format!("qs{n}-producer")) {
        n += 1;
    }
    let execution = format!("quickstart-{n}");
    say(&format!("store: {}", engine.describe_store()));

    // Principals: each acts with its own token; none of these tokens is ever printed.
    let far = engine.now().await?.plus_seconds(86_400);
    let mut who = BTreeMap::new();
    for (role, access) in [
        (Role::Producer, Access::Write),
        (Role::Runner, Access::Write),
        (Role::Verifier, Access::Read),
    ] {
        let name = format!("qs{n}-{}", role.as_str());
        let token = engine.add_principal(&ops, &name, role).await?;
        engine
            .grant(
                &ops,
                &format!("{name}-grant"),
                &name,
                ScopeKind::Execution,
                &execution,
                access,
                &far,
            )
            .await?;
        who.insert(role.as_str(), engine.authenticate(&token).await?);
    }
    let get = |r: &str| {
        who.get(r)
            .cloned()
            .ok_or_else(|| EngineError::Conflict(format!("no {r} principal")))
    };
    let (producer, runner_p, verifier) = (get("producer")?, get("runner")?, get("verifier")?);
    say(&format!(
        "1. principals: {} (operator), {}, {}, {}",
        ops.name(),
        producer.name(),
        runner_p.name(),
        verifier.name()
    ));

    let version = Arc::new(AtomicU8::new(1));
    let port = serve(version.clone()).await?;
    say(&format!(
        "2. service: greeting service v1 listening on 127.0.0.1:{port}"
    ));

    let vars = BTreeMap::from([("port".to_owned(), port.to_string())]);
    let spec = load::load_bytes(SPEC.as_bytes(), load::Format::Yaml, &vars).map_err(|e| {
        EngineError::Invalid {
            what: "example check spec",
            message: e.to_string(),
        }
    })?;
    let policy = json!({
        "schema": "verdict.policy/v1",
        "name": "quickstart",
        "revision": 1,
        "required_checks": ["healthz-ok", "greets-by-name"],
        "required_verifiers": ["reviewer"],
    });
    let pd = engine.set_policy(&ops, &policy).await?;
    say(&format!(
        "3. policy: checks healthz-ok and greets-by-name, one reviewer ({pd})"
    ));

    let script = Scripted { port };
    let mut decisions = Vec::new();
    for (step, diff) in [(4, "greet: v1"), (10, "greet: v2 escapes the name")] {
        if step > 4 {
            version.store(2, Ordering::SeqCst);
            say(&format!(
                "{}. producer: fix deployed (service v2)",
                step - 1
            ));
        }
        let subject = subject(&execution, producer.name(), diff, &spec);
        let sd = engine.put_subject(&producer, &subject).await?;
        say(&format!("{step}. producer: subject {sd} ({diff})"));
        let report = runner::run(
            &spec,
            runner::RunOptions {
                jobs: 4,
                ..runner::RunOptions::default()
            },
            Arc::new(runner::Quiet),
            &runner::Stopper::new(),
        )
        .await;
        let docs = evidence::evidence_documents(&report, &spec, &sd, runner_p.name()).map_err(
            |message| EngineError::Invalid {
                what: "check evidence",
                message,
            },
        )?;
        engine.add_evidence(&runner_p, &docs).await?;
        let outcomes: Vec<String> = report
            .criteria
            .iter()
            .map(|c| format!("{} {}", c.id, c.outcome.as_str()))
            .collect();
        say(&format!(
            "{}. runner: verdict check -> {}",
            step + 1,
            outcomes.join(", ")
        ));
        let request = engine
            .create_request(&producer, &execution, &json!({"max_runs": 1}))
            .await?;
        let run_id = format!("qs{n}-review-{step}");
        let pre = engine
            .admit(
                &ops,
                &request,
                verifier.name().as_str(),
                "reviewer",
                &run_id,
            )
            .await?;
        say(&format!(
            "{}. operator: request {request}; reviewer admitted to {run_id}; preflight {}",
            step + 2,
            if pre.skipped {
                "settled it"
            } else {
                "leaves it to the reviewer"
            }
        ));
        match engine.run_model(&ops, &run_id, &script).await? {
            RunOutcome::Submitted(s) => say(&format!(
                "{}. reviewer: result {} ({})",
                step + 3,
                s.digest,
                if s.counted { "counted" } else { "history only" }
            )),
            RunOutcome::Skipped(p) => say(&format!(
                "{}. reviewer: not called ({})",
                step + 3,
                p.reasons.join("; ")
            )),
        }
        let g = engine.gate_run(&ops, &execution).await?;
        let why: Vec<&str> = g.decision.reasons.iter().map(|r| r.code.as_str()).collect();
        say(&format!(
            "{}. gate: {}{}",
            step + 4,
            g.decision.outcome.as_str(),
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join(", "))
            }
        ));
        decisions.push(g.decision);
    }
    let _ = verifier;
    say(&format!(
        "done: execution {execution} passed on its second subject."
    ));
    Ok(Quickstart {
        execution,
        decisions,
        operator_token,
    })
}

fn subject(execution: &str, producer: &Name, diff: &str, spec: &load::Spec) -> Value {
    let pin = |id: &str, criterion: &str| {
        let def = spec
            .checks
            .iter()
            .find(|c| c.id.as_str() == id)
            .map(|c| c.definition_digest.to_string());
        json!({"id": id, "definition_digest": def, "criteria": [criterion]})
    };
    json!({
        "schema": "verdict.subject/v1",
        "execution": {"id": execution, "generation": 1},
        "work_items": [{"kind": "work_package", "id": "greeting", "version": diff}],
        "producer": {"principal": producer.as_str(), "run": format!("{producer}-run")},
        "objective": {"revision": "1", "digest": verdict_core::digest::raw(b"greet people by name").as_str()},
        "criteria": {"revision": "1", "items": [
            {"id": "service-healthy", "text": "the service stays healthy"},
            {"id": "greets-by-name", "text": "the greeting names the caller"},
            {"id": "escapes-input", "text": "a name is never interpreted as markup", "role": "safety"}
        ]},
        "resources": [{"name": "diff", "kind": "git_diff", "digest": verdict_core::digest::raw(diff.as_bytes()).as_str()}],
        "checks": [pin("healthz-ok", "service-healthy"), pin("greets-by-name", "greets-by-name")],
        "workflow_revision": "quickstart-1",
        "risk": {"class": "low", "revision": "1", "capabilities": ["web"]}
    })
}

/// The scripted reviewer: it sends markup as a name and looks at what comes back.
struct Scripted {
    port: u16,
}

#[async_trait]
impl ModelVerifier for Scripted {
    async fn verify(&self, task: &VerifyTask) -> std::result::Result<Value, String> {
        let body = get(self.port, "/greet?name=%3Cb%3Eada%3C%2Fb%3E")
            .await
            .map_err(|e| e.to_string())?;
        let escaped = !body.contains("<b>");
        let ev_of = |check: &str| {
            task.evidence
                .iter()
                .find(|e| e.check.as_str() == check)
                .map(|e| e.id.to_string())
                .unwrap_or_default()
        };
        let sd = task.subject_digest.as_str();
        let run = task.run_id.as_str();
        let prior: Vec<Value> = task
            .request
            .prior_blockers
            .iter()
            .map(|p| {
                json!({"finding": p.id.as_str(), "version": p.version,
                       "disposition": if escaped { "resolved" } else { "still_present" },
                       "evidence_refs": ["diff"]})
            })
            .collect();
        let findings = if escaped {
            json!([])
        } else {
            // Finding ids are global: this one is named for the subject it was found on.
            let id = format!("f-unescaped-name-{}", sd.get(7..19).unwrap_or_default());
            json!([{"id": id, "version": 1, "criterion": "escapes-input", "type": "injection",
                    "severity": "blocker", "scope": "change", "subject_digest": sd,
                    "location": {"resource": "diff"}, "evidence_refs": ["diff"], "method": "probe",
                    "remediation": "escape the name before writing it into HTML"}])
        };
        Ok(json!({
            "id": format!("vr-{run}"),
            "verifier": {"principal": task.verifier.as_str(), "class": task.class.as_str(), "run": run},
            "subject_digest": sd,
            "generation": task.generation,
            "status": "completed",
            "criteria": [
                {"id": "service-healthy", "status": "passed", "method": "evidence", "evidence_refs": [ev_of("healthz-ok")]},
                {"id": "greets-by-name", "status": "passed", "method": "evidence", "evidence_refs": [ev_of("greets-by-name")]},
                {"id": "escapes-input", "status": if escaped { "passed" } else { "failed" }, "method": "probe", "evidence_refs": ["diff"]}
            ],
            "findings": findings,
            "dispositions": prior,
        }))
    }
}

fn io_err(e: std::io::Error) -> EngineError {
    EngineError::Conflict(format!("example service: {e}"))
}

/// Starts the greeting service on a free loopback port; `version` picks its behaviour.
async fn serve(version: Arc<AtomicU8>) -> Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(io_err)?;
    let port = listener.local_addr().map_err(io_err)?.port();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let version = version.load(Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0_u8; 4096];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(buf.get(..n).unwrap_or_default()).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let (status, body) = respond(&path, version);
                let reply = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(reply.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Ok(port)
}

fn respond(path: &str, version: u8) -> (&'static str, String) {
    if path == "/healthz" {
        return ("200 OK", "ok".into());
    }
    let Some(query) = path.strip_prefix("/greet?name=") else {
        return ("404 Not Found", "not found".into());
    };
    let name = decode(query);
    let shown = if version >= 2 {
        name.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    } else {
        name
    };
    ("200 OK", format!("<p>hello, {shown}</p>"))
}

/// Percent-decoding of a query value (enough for the example).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn get(port: u16, path: &str) -> std::io::Result<String> {
    let mut sock = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    sock.write_all(
        format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut out = String::new();
    sock.read_to_string(&mut out).await?;
    Ok(out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default())
}
