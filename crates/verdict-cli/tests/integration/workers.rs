//! `verdict worker` as real processes on PostgreSQL: a runner (the probes against a service on
//! loopback), two verifiers (a fake OpenAI-compatible server on loopback) and a gate worker drain
//! the jobs of many requests to decisions, each job done by one claim; SIGTERM stops each
//! worker cleanly; a verifier killed with SIGKILL mid-job loses its job to another worker once
//! its lease lapses; a verifier stopped mid-job and woken after the takeover writes nothing;
//! workers whose database connections are all cut reconnect and lose nothing; a runner runs
//! the check definition each subject pins and refuses a subject pinning one it was not given.
//!
//! `VERDICT_WORKERS_TEST_REQUESTS` sets how many requests the drain test makes (default 30).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use axum::Router;
use axum::extract::State;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const OBJECTIVE: &str = "Answer the health check";
const DIFF: &str = "--- a/health.rs\n+++ b/health.rs\n+    ok()\n";

/// The check spec the runner worker runs: the service's health endpoint answers `ok`.
const SPEC: &str = r#"
version: 1
vars: {port: "0"}
defaults: {timeout: 5s, interval: 100ms, probe_timeout: 2s, max_age: 10m}
criteria:
  - id: healthz-ok
    description: the health endpoint answers 200 with "ok"
    probe: {kind: http, url: "http://127.0.0.1:{{port}}/healthz", status: 200, body: {equals: ok}}
"#;

fn nonce_of(system: &str) -> String {
    let tag = "Rules for this request (nonce ";
    let at = system.find(tag).expect("nonce line") + tag.len();
    system[at..at + 32].to_owned()
}

/// What the fake provider is told: the calls numbered in `hang` (counting from 0) never get an
/// answer; the call numbered `held` gets one only once `release` is set.
#[derive(Clone)]
struct Script {
    calls: Arc<AtomicUsize>,
    hang: Vec<usize>,
    held: Option<usize>,
    release: Arc<AtomicBool>,
}

/// The fake provider: every criterion passed, citing the diff, as [`Script`] says.
async fn answer(State(script): State<Script>, body: axum::body::Bytes) -> axum::Json<Value> {
    let call = script.calls.fetch_add(1, Ordering::SeqCst);
    if script.hang.contains(&call) {
        std::future::pending::<()>().await;
    }
    if script.held == Some(call) {
        while !script.release.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let req: Value = serde_json::from_slice(&body).unwrap();
    let system = req["messages"][0]["content"].as_str().unwrap_or_default();
    let reply = json!({"nonce": nonce_of(system), "findings": [], "dispositions": [],
        "criteria": [{"id": "healthy", "status": "passed", "evidence_refs": ["diff"],
                      "rationale": "the diff answers ok"}]});
    axum::Json(json!({
        "id": "c-1", "model": "judge-model", "system_fingerprint": "fp_workers",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": reply.to_string()}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10}
    }))
}

/// The loopback servers: the service the checks probe and the fake provider.
struct Servers {
    service_port: u16,
    provider_url: String,
    calls: Arc<AtomicUsize>,
    release: Arc<AtomicBool>,
    _rt: tokio::runtime::Runtime,
}

fn servers(hang: Vec<usize>) -> Servers {
    servers_holding(hang, None)
}

fn servers_holding(hang: Vec<usize>, held: Option<usize>) -> Servers {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(AtomicBool::new(false));
    let script = Script {
        calls: calls.clone(),
        hang,
        held,
        release: release.clone(),
    };
    let provider = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let provider_url = format!("http://{}/v1", provider.local_addr().unwrap());
    let app = Router::new().fallback(answer).with_state(script);
    rt.spawn(async move { axum::serve(provider, app).await });
    let service = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let service_port = service.local_addr().unwrap().port();
    let app = Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route("/ready", axum::routing::get(|| async { "ok" }));
    rt.spawn(async move { axum::serve(service, app).await });
    Servers {
        service_port,
        provider_url,
        calls,
        release,
        _rt: rt,
    }
}

struct Env {
    store: String,
    dir: tempfile::TempDir,
    _pg: verdict_store::scratch::ScratchPostgres,
    ops: String,
    coder: String,
    ci: String,
    rev: String,
    spec: String,
    verifiers: String,
    content: String,
    port: String,
    /// The request of execution `ex-I` at index I.
    requests: Vec<String>,
}

impl Env {
    fn command(&self, token: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_verdict"));
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("VERDICT_STORE", &self.store)
            .env("VERDICT_HOME", self.dir.path().join("home"))
            .env("VERDICT_TOKEN", token);
        cmd
    }

    fn run(&self, token: &str, args: &[&str]) -> Output {
        self.command(token, args).output().unwrap()
    }

    fn ok(&self, token: &str, args: &[&str]) -> String {
        let out = self.run(token, args);
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    }

    /// A worker process of `role` as `token`, polling every 50 ms.
    fn worker(&self, token: &str, role: &str, lease_seconds: &str) -> Child {
        self.worker_with(token, role, lease_seconds, Stdio::null())
    }

    /// [`Env::worker`] with its standard output going to `stdout`.
    fn worker_with(&self, token: &str, role: &str, lease_seconds: &str, stdout: Stdio) -> Child {
        let mut args = vec![
            "worker",
            "--role",
            role,
            "--poll-ms",
            "50",
            "--lease-seconds",
            lease_seconds,
        ];
        match role {
            "runner" => args.extend(["--checks", &self.spec, "--var"]),
            "verifier" => {
                args.extend(["--verifiers", &self.verifiers, "--content", &self.content]);
            }
            _ => {}
        }
        let var = format!("port={}", self.port);
        if role == "runner" {
            args.push(&var);
        }
        // A line per job on standard output is not read here; a full pipe would stall the worker.
        self.command(token, &args)
            .stdout(stdout)
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap()
    }

    /// The jobs of request `request`: kind to (state, attempts, outcome or last error).
    fn jobs_of(&self, request: &str) -> BTreeMap<String, (String, String, String)> {
        self.ok(&self.ops, &["jobs", "list", "--request", request])
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                let note = f.get(7..).map(|r| r.join(" ")).unwrap_or_default();
                (f[1].to_owned(), (f[2].to_owned(), f[3].to_owned(), note))
            })
            .collect()
    }

    /// Every job as `jobs list` prints it: id to (kind, state, attempts, fencing, outcome).
    fn jobs(&self) -> BTreeMap<u64, (String, String, String, String, String)> {
        self.ok(&self.ops, &["jobs", "list"])
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                let outcome = f.get(7..).map(|r| r.join(" ")).unwrap_or_default();
                (
                    f[0].parse().unwrap(),
                    (
                        f[1].to_owned(),
                        f[2].to_owned(),
                        f[3].to_owned(),
                        f[4].to_owned(),
                        outcome,
                    ),
                )
            })
            .collect()
    }

    /// Waits until `count` jobs are done; the bound only keeps a broken run from hanging CI.
    fn wait_done(&self, count: usize, workers: &mut [Child]) {
        self.wait_finished(count, 0, workers);
    }

    /// Waits until `done` jobs are done and `failed` given up.
    fn wait_finished(&self, count: usize, failed: usize, workers: &mut [Child]) {
        let start = Instant::now();
        loop {
            let jobs = self.jobs();
            let given_up = jobs
                .values()
                .filter(|(_, state, ..)| state == "failed")
                .count();
            let done = jobs
                .values()
                .filter(|(_, state, ..)| state == "done")
                .count();
            if done == count && given_up == failed {
                return;
            }
            for w in workers.iter_mut() {
                if let Some(status) = w.try_wait().unwrap() {
                    panic!("a worker exited early with {status}");
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(600),
                "{done} of {count} jobs done: {:?}",
                self.jobs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// A store with an operator, a producer, a runner and a verifier granted on mission `m`, a
/// policy needing `healthz-ok` and `reviewer`, and `requests` executions each with a subject,
/// a request and the request's jobs.
fn setup(srv: &Servers, requests: usize) -> Env {
    setup_pinning(srv, requests, |_| SPEC)
}

/// [`setup`], the subject of execution `ex-I` pinning the check of spec `spec_of(I)`.
fn setup_pinning(srv: &Servers, requests: usize, spec_of: impl Fn(usize) -> &'static str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let pg = verdict_store::scratch::ScratchPostgres::create("workers").unwrap();
    let mut env = Env {
        store: pg.url().to_owned(),
        dir,
        _pg: pg,
        ops: String::new(),
        coder: String::new(),
        ci: String::new(),
        rev: String::new(),
        spec: String::new(),
        verifiers: String::new(),
        content: String::new(),
        port: srv.service_port.to_string(),
        requests: Vec::new(),
    };
    let init = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["init", "--operator", "ops"])
        .current_dir(env.dir.path())
        .env("VERDICT_STORE", &env.store)
        .env_remove("VERDICT_TOKEN")
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    env.ops = String::from_utf8(init.stdout).unwrap().trim().to_owned();
    let add = |n: &str, r: &str| env.ok(&env.ops, &["principal", "add", n, "--role", r]);
    let (coder, ci, rev) = (
        add("coder", "producer"),
        add("ci", "runner"),
        add("rev", "verifier"),
    );
    for (g, p, a) in [
        ("g-coder", "coder", "write"),
        ("g-ci", "ci", "write"),
        ("g-rev", "rev", "read"),
    ] {
        env.ok(
            &env.ops,
            &[
                "grant",
                "add",
                g,
                "--principal",
                p,
                "--mission",
                "m",
                "--access",
                a,
                "--expires",
                "2099-01-01T00:00:00Z",
            ],
        );
    }
    let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                        "required_checks": ["healthz-ok"], "required_verifiers": ["reviewer"]});
    let pf = env.file("policy.json", policy.to_string().as_bytes());
    env.ok(&env.ops, &["policy", "set", &pf]);
    env.spec = env.file("checks.yaml", SPEC.as_bytes());
    let vars = BTreeMap::from([("port".to_owned(), env.port.clone())]);
    let definition_of = |spec: &str| {
        verdict_probes::load::load_bytes(spec.as_bytes(), verdict_probes::load::Format::Yaml, &vars)
            .unwrap()
            .checks[0]
            .definition_digest
            .to_string()
    };
    let verifiers = json!({"version": 1, "classes": {"reviewer": {
        "provider": {"kind": "openai", "base_url": srv.provider_url, "model": "judge-model"},
        "cache": false, "budget": {"timeout_s": 600, "max_attempts": 1, "backoff_ms": 10}}}});
    env.verifiers = env.file("verifiers.json", verifiers.to_string().as_bytes());
    let content = env.dir.path().join("content");
    std::fs::create_dir_all(&content).unwrap();
    let objective = verdict_core::digest::raw(OBJECTIVE.as_bytes());
    let diff = verdict_core::digest::raw(DIFF.as_bytes());
    for (d, bytes) in [(&objective, OBJECTIVE), (&diff, DIFF)] {
        let hex = d.as_str().rsplit(':').next().unwrap();
        std::fs::write(content.join(hex), bytes).unwrap();
    }
    env.content = content.display().to_string();
    for i in 0..requests {
        let execution = format!("ex-{i}");
        let definition = definition_of(spec_of(i));
        let subject = json!({
            "schema": "verdict.subject/v1",
            "mission": "m",
            "execution": {"id": execution, "generation": 1},
            "work_items": [], "producer": {"principal": "coder", "run": "run-coder"},
            "objective": {"revision": "1", "digest": objective.as_str()},
            "criteria": {"revision": "1", "items": [{"id": "healthy", "text": "it answers ok"}]},
            "resources": [{"name": "diff", "kind": "git_diff", "digest": diff.as_str()}],
            "checks": [{"id": "healthz-ok", "definition_digest": definition, "criteria": ["healthy"]}],
            "workflow_revision": "1", "risk": {"class": "low", "revision": "1", "capabilities": []}
        });
        let sf = env.file(&format!("subject-{i}.json"), subject.to_string().as_bytes());
        env.ok(&coder, &["subject", "put", &sf]);
        let request = env.ok(&coder, &["request", "create", &execution]);
        env.ok(&coder, &["jobs", "enqueue", &request]);
        env.requests.push(request);
    }
    env.coder = coder;
    env.ci = ci;
    env.rev = rev;
    env
}

#[test]
fn worker_processes_drain_many_requests_each_job_done_by_one_claim() {
    let requests: usize = std::env::var("VERDICT_WORKERS_TEST_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(30);
    let srv = servers(Vec::new());
    let env = setup(&srv, requests);
    assert_eq!(env.jobs().len(), 3 * requests);
    let mut workers = vec![
        env.worker(&env.ci, "runner", "60"),
        env.worker(&env.rev, "verifier", "60"),
        env.worker(&env.ops, "gate", "60"),
        // A second verifier races the first for every verify job.
        env.worker(&env.rev, "verifier", "60"),
    ];
    env.wait_done(3 * requests, &mut workers);
    for w in &workers {
        sigterm(w);
    }
    for w in workers {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let jobs = env.jobs();
    for (id, (kind, state, attempts, fencing, outcome)) in &jobs {
        assert_eq!(
            (state.as_str(), attempts.as_str(), fencing.as_str()),
            ("done", "attempts=1", "fencing=1"),
            "job {id}"
        );
        if kind == "gate" {
            assert!(outcome.starts_with("pass sha256:"), "job {id}: {outcome}");
        }
    }
    assert_eq!(
        srv.calls.load(Ordering::SeqCst),
        requests,
        "one model call per request"
    );
    let audit = env.run(&env.ops, &["audit", "verify"]);
    assert!(audit.status.success(), "{audit:?}");
}

#[test]
fn a_verifier_killed_mid_job_loses_it_to_another_once_its_lease_lapses() {
    // The first model call never answers: the first verifier is stuck in it when killed.
    let srv = servers(vec![0]);
    let env = setup(&srv, 1);
    let runner = env.worker(&env.ci, "runner", "60");
    let mut first = env.worker(&env.rev, "verifier", "2");
    let start = Instant::now();
    while srv.calls.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{:?}",
            env.jobs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let mut workers = vec![
        runner,
        env.worker(&env.rev, "verifier", "2"),
        env.worker(&env.ops, "gate", "60"),
    ];
    env.wait_done(3, &mut workers);
    for w in &workers {
        sigterm(w);
    }
    for w in workers {
        assert!(w.wait_with_output().unwrap().status.success());
    }
    let jobs = env.jobs();
    let (_, _, attempts, fencing, outcome) = jobs
        .values()
        .find(|(kind, ..)| kind == "verify")
        .unwrap()
        .clone();
    assert_eq!(
        (attempts.as_str(), fencing.as_str()),
        ("attempts=2", "fencing=2")
    );
    assert!(outcome.contains("-2 completed"), "{outcome}");
    let gate = jobs.values().find(|(kind, ..)| kind == "gate").unwrap();
    assert!(gate.4.starts_with("pass "), "{gate:?}");
}

/// The health check again, on another endpoint: another definition of `healthz-ok`.
const SPEC_READY: &str = r#"
version: 1
vars: {port: "0"}
defaults: {timeout: 5s, interval: 100ms, probe_timeout: 2s, max_age: 10m}
criteria:
  - id: healthz-ok
    description: the readiness endpoint answers 200 with "ok"
    probe: {kind: http, url: "http://127.0.0.1:{{port}}/ready", status: 200, body: {equals: ok}}
"#;

/// A third definition of `healthz-ok`, which no runner is given.
const SPEC_UNGIVEN: &str = r#"
version: 1
vars: {port: "0"}
defaults: {timeout: 7s, interval: 100ms, probe_timeout: 2s, max_age: 10m}
criteria:
  - id: healthz-ok
    description: the health endpoint answers 200 with "ok", more patiently
    probe: {kind: http, url: "http://127.0.0.1:{{port}}/healthz", status: 200, body: {equals: ok}}
"#;

#[test]
fn a_runner_runs_the_definition_each_subject_pins_and_refuses_one_it_was_not_given() {
    let srv = servers(Vec::new());
    let mut env = setup_pinning(&srv, 3, |i| [SPEC, SPEC_READY, SPEC_UNGIVEN][i]);
    // The runner is given a directory of two specs: the definitions ex-0 and ex-1 pin.
    let specs = env.dir.path().join("specs");
    std::fs::create_dir_all(&specs).unwrap();
    std::fs::write(specs.join("health.yaml"), SPEC).unwrap();
    std::fs::write(specs.join("ready.yaml"), SPEC_READY).unwrap();
    std::fs::write(specs.join("notes.txt"), "not a spec").unwrap();
    env.spec = specs.display().to_string();
    let mut workers = vec![
        env.worker(&env.ci, "runner", "60"),
        env.worker(&env.rev, "verifier", "60"),
        env.worker(&env.ops, "gate", "60"),
    ];
    // Every job done but ex-2's checks job, given up at its first attempt.
    env.wait_finished(8, 1, &mut workers);
    for w in &workers {
        sigterm(w);
    }
    for w in workers {
        assert!(w.wait_with_output().unwrap().status.success());
    }
    for i in 0..2 {
        let jobs = env.jobs_of(&env.requests[i]);
        assert_eq!(jobs["checks"].0, "done", "ex-{i}: {jobs:?}");
        assert!(jobs["gate"].2.starts_with("pass "), "ex-{i}: {jobs:?}");
    }
    let jobs = env.jobs_of(&env.requests[2]);
    let (state, attempts, why) = &jobs["checks"];
    assert_eq!(
        (state.as_str(), attempts.as_str()),
        ("failed", "attempts=1")
    );
    assert!(
        why.contains("check healthz-ok pins definition sha256:") && why.contains("hashes to"),
        "{why}"
    );
    // The Gate finds the pinned check's evidence missing.
    assert!(!jobs["gate"].2.starts_with("pass "), "{jobs:?}");
}

/// Kills the worker processes it was given when dropped (a failed test leaves none behind
/// polling for a database that is gone).
struct Reap(Vec<u32>);

impl Reap {
    fn add(&mut self, child: Child) -> Child {
        self.0.push(child.id());
        child
    }
}

impl Drop for Reap {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_calls(srv: &Servers, env: &Env, n: usize) {
    let start = Instant::now();
    while srv.calls.load(Ordering::SeqCst) < n {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{:?}",
            env.jobs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Cuts every connection to the test's database but this one, as a database restart would;
/// returns how many were cut.
fn cut_connections(env: &Env) -> i64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use sqlx::Connection as _;
        let mut conn = sqlx::PgConnection::connect(&env.store).await.unwrap();
        let cut: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()) t",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        cut
    })
}

#[test]
fn killed_stopped_and_disconnected_workers_lose_nothing_and_do_nothing_twice() {
    const REQUESTS: usize = 8;
    // The first model call never answers: its worker is killed in it. The second answers only
    // when released: its worker is stopped in it, and woken after its job was taken over.
    let srv = servers_holding(vec![0], Some(1));
    let env = setup(&srv, REQUESTS);
    let mut reap = Reap(Vec::new());
    let runner = reap.add(env.worker(&env.ci, "runner", "3"));
    let gate = reap.add(env.worker(&env.ops, "gate", "3"));
    let mut killed = env.worker(&env.rev, "verifier", "2");
    wait_calls(&srv, &env, 1);
    killed.kill().unwrap();
    killed.wait().unwrap();
    let stopped = reap.add(env.worker_with(&env.rev, "verifier", "2", Stdio::piped()));
    wait_calls(&srv, &env, 2);
    signal(&stopped, "-STOP");
    let mut workers = vec![
        runner,
        gate,
        reap.add(env.worker(&env.rev, "verifier", "2")),
        reap.add(env.worker(&env.rev, "verifier", "2")),
    ];
    // Mid-run, every connection of every worker is cut.
    let start = Instant::now();
    while env
        .jobs()
        .values()
        .filter(|(_, state, ..)| state == "done")
        .count()
        < REQUESTS
    {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "{:?}",
            env.jobs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        cut_connections(&env) > 0,
        "the workers had connections to cut"
    );
    env.wait_done(3 * REQUESTS, &mut workers);
    // The stopped worker wakes up, its model call answers: its job is another's by now.
    signal(&stopped, "-CONT");
    srv.release.store(true, Ordering::SeqCst);
    let mut stopped = stopped;
    let stdout = stopped.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Its renewal or its submission is refused, whichever it reaches first: it reports the job
    // lost and writes nothing.
    let lost = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the stopped worker reports its job lost");
        if line.starts_with("lost ") && line.contains(" verify ") {
            break line;
        }
    };
    workers.push(stopped);
    for w in &workers {
        sigterm(w);
    }
    for w in workers {
        assert!(w.wait_with_output().unwrap().status.success());
    }
    // Every worker has exited: nothing is left to reap.
    reap.0.clear();
    let jobs = env.jobs();
    assert!(
        jobs.values().all(|(_, state, ..)| state == "done"),
        "{jobs:?}"
    );
    let lost_id: u64 = lost.split(' ').nth(1).unwrap().parse().unwrap();
    assert_ne!(
        jobs[&lost_id].3, "fencing=1",
        "the stopped worker's job was taken over"
    );
    // Each request: exactly one counted, completed run, whatever was killed, stopped or cut;
    // the runs of the lost claims ended without a result.
    let mut completed = 0;
    for i in 0..REQUESTS {
        let h: Value =
            serde_json::from_str(&env.ok(&env.ops, &["history", &format!("ex-{i}"), "--json"]))
                .unwrap();
        let runs = h["runs"].as_array().unwrap();
        let counted: Vec<&Value> = runs
            .iter()
            .filter(|r| r["status"] == "completed" && r["counted"] == true)
            .collect();
        assert_eq!(counted.len(), 1, "ex-{i}: {runs:?}");
        completed += counted.len();
        for r in runs.iter().filter(|r| r["status"] != "completed") {
            assert_eq!(r["status"], "cancelled", "ex-{i}: {r}");
            assert!(
                r["detail"].as_str().unwrap().contains("was taken over"),
                "ex-{i}: {r}"
            );
        }
        let gate = env.jobs_of(&env.requests[i]);
        assert!(gate["gate"].2.starts_with("pass "), "ex-{i}: {gate:?}");
    }
    assert_eq!(completed, REQUESTS);
    let audit = env.run(&env.ops, &["audit", "verify"]);
    assert!(audit.status.success(), "{audit:?}");
}
