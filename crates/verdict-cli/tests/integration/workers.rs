//! `verdict worker` as real processes on PostgreSQL: a runner (the probes against a service on
//! loopback), a verifier (a fake OpenAI-compatible server on loopback) and a gate worker drain
//! the jobs of hundreds of requests to decisions, each job done by one claim; two verifiers
//! racing for the same jobs never do one twice; SIGTERM stops each worker cleanly; a verifier
//! killed with SIGKILL mid-job loses its job to another worker once its lease lapses; a
//! verifier stopped mid-job and woken after the takeover writes nothing; workers whose
//! database connections are all cut reconnect and lose nothing; workers on a PostgreSQL
//! cluster of the test's own that crashes mid-run and starts again lose nothing and do nothing
//! twice; a
//! worker whose database never answers gives up after `--give-up-after`; a runner runs the
//! check definition each subject pins and refuses a subject pinning one it was not given.
//!
//! The stores are set up through the engine in the test process; the workers are always the
//! `verdict` binary. `VERDICT_WORKERS_TEST_REQUESTS` lowers how many requests the drain test
//! makes (default 300; with `CI` set, never fewer).
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
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use verdict_core::contracts::{Role, Timestamp};
use verdict_engine::{DEFAULT_GATE, Engine, Principal};
use verdict_store::{Access, Job, JobFilter, Location, ScopeKind, StoreClock};

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
    /// How long each answer takes.
    delay: Duration,
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
    tokio::time::sleep(script.delay).await;
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
    servers_with(hang, held, Duration::ZERO)
}

fn servers_with(hang: Vec<usize>, held: Option<usize>, delay: Duration) -> Servers {
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
        delay,
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

/// A `verdict worker` process, killed and waited for when dropped: a test that fails leaves no
/// worker behind polling a database that is gone.
struct Worker(Option<Child>);

impl Worker {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("a worker not yet waited for")
    }

    fn signal(&self, sig: &str) {
        let pid = self.0.as_ref().expect("a running worker").id();
        let status = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGKILL, then waits for it.
    fn kill(&mut self) {
        let child = self.child();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Waits for it to exit by itself.
    fn wait(mut self) -> Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends SIGTERM to every worker, then waits for each: each must exit 0 (it finished the job
/// in hand and stopped).
fn stop_all(workers: Vec<Worker>) {
    for w in &workers {
        w.signal("-TERM");
    }
    for w in workers {
        let out = w.wait();
        assert!(out.status.success(), "{out:?}");
    }
}

/// A job as the tests look at it: (kind, state, `attempts=N`, `fencing=N`, outcome or last
/// error), the fields `verdict jobs list` prints.
type Row = (String, String, String, String, String);

fn row(j: &Job) -> Row {
    (
        j.kind.to_string(),
        j.state.as_str().to_owned(),
        format!("attempts={}", j.attempts),
        format!("fencing={}", j.fencing),
        j.outcome
            .clone()
            .or_else(|| j.last_error.clone())
            .unwrap_or_default(),
    )
}

struct Env {
    store: String,
    dir: tempfile::TempDir,
    /// The engine on the test's side, as the operator: setup and reading the queue. Dropped
    /// inside `rt` (its pool hands connections back on a task).
    engine: Option<Engine>,
    operator: Principal,
    rt: tokio::runtime::Runtime,
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
    /// Dropped last: the scratch database, once nothing holds a connection to it.
    _pg: Option<verdict_store::scratch::ScratchPostgres>,
}

impl Drop for Env {
    fn drop(&mut self) {
        let _inside = self.rt.enter();
        drop(self.engine.take());
    }
}

impl Env {
    fn engine(&self) -> &Engine {
        self.engine.as_ref().expect("the engine, until the end")
    }

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

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    }

    /// A worker process of `role` as `token`, polling every 50 ms.
    fn worker(&self, token: &str, role: &str, lease_seconds: &str) -> Worker {
        self.worker_with(token, role, lease_seconds, Stdio::null(), Stdio::inherit())
    }

    /// [`Env::worker`] with its standard output and error going where given.
    fn worker_with(
        &self,
        token: &str,
        role: &str,
        lease_seconds: &str,
        stdout: Stdio,
        stderr: Stdio,
    ) -> Worker {
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
        Worker(Some(
            self.command(token, &args)
                .stdout(stdout)
                .stderr(stderr)
                .spawn()
                .unwrap(),
        ))
    }

    fn try_jobs_matching(&self, filter: &JobFilter) -> verdict_engine::Result<Vec<Job>> {
        self.rt.block_on(self.engine().jobs(&self.operator, filter))
    }

    /// Every job: id to its [`Row`], or the engine's error (the database away).
    fn try_jobs(&self) -> verdict_engine::Result<BTreeMap<u64, Row>> {
        let filter = JobFilter {
            request: None,
            kind: None,
            state: None,
        };
        Ok(self
            .try_jobs_matching(&filter)?
            .iter()
            .map(|j| (u64::try_from(j.id).unwrap(), row(j)))
            .collect())
    }

    /// Every job: id to its [`Row`].
    fn jobs(&self) -> BTreeMap<u64, Row> {
        self.try_jobs().unwrap()
    }

    /// The jobs of request `request`: kind to (state, attempts, outcome or last error).
    fn jobs_of(&self, request: &str) -> BTreeMap<String, (String, String, String)> {
        let filter = JobFilter {
            request: Some(request.parse().unwrap()),
            kind: None,
            state: None,
        };
        self.try_jobs_matching(&filter)
            .unwrap()
            .iter()
            .map(|j| {
                let (kind, state, attempts, _, note) = row(j);
                (kind, (state, attempts, note))
            })
            .collect()
    }

    /// Waits until `count` jobs are done; the bound only keeps a broken run from hanging CI.
    fn wait_done(&self, count: usize, workers: &mut [Worker]) {
        self.wait_finished(count, 0, workers);
    }

    /// Waits until `done` jobs are done and `failed` given up. A moment when the queue cannot
    /// be read (the database restarting) is waited out.
    fn wait_finished(&self, count: usize, failed: usize, workers: &mut [Worker]) {
        let start = Instant::now();
        loop {
            if let Ok(jobs) = self.try_jobs() {
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
                assert!(
                    start.elapsed() < Duration::from_secs(600),
                    "{done} of {count} jobs done: {jobs:?}"
                );
            }
            for w in workers.iter_mut() {
                if let Some(status) = w.child().try_wait().unwrap() {
                    panic!("a worker exited early with {status}");
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The principal holding `token`.
    fn principal(&self, token: &str) -> Principal {
        self.rt.block_on(self.engine().authenticate(token)).unwrap()
    }
}

/// A store with an operator, a producer, a runner and a verifier granted on mission `m`, a
/// policy needing `healthz-ok` and `reviewer`, and `requests` executions each with a subject,
/// a request and the request's jobs.
fn setup(srv: &Servers, requests: usize) -> Env {
    setup_pinning(srv, requests, |_| SPEC)
}

/// [`setup`] on a scratch database of the shared server, the subject of execution `ex-I`
/// pinning the check of spec `spec_of(I)`.
fn setup_pinning(srv: &Servers, requests: usize, spec_of: impl Fn(usize) -> &'static str) -> Env {
    let pg = verdict_store::scratch::ScratchPostgres::create_migrated("workers").unwrap();
    setup_in(srv, requests, spec_of, pg.url().to_owned(), Some(pg))
}

/// [`setup_pinning`] in the PostgreSQL database at `url`, through the engine in this process
/// (as `verdict init`, `principal add`, `grant add`, `policy set`, `subject put`, `request
/// create` and `jobs enqueue` would do it, without a process each).
fn setup_in(
    srv: &Servers,
    requests: usize,
    spec_of: impl Fn(usize) -> &'static str,
    url: String,
    pg: Option<verdict_store::scratch::ScratchPostgres>,
) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let store = rt
        .block_on(verdict_store::open(&Location::Postgres(url.clone())))
        .unwrap();
    let engine = Engine::new(store, DEFAULT_GATE);
    let ops = rt.block_on(engine.init("ops", StoreClock::System)).unwrap();
    let operator = rt.block_on(engine.authenticate(&ops)).unwrap();
    let mut env = Env {
        store: url,
        dir,
        engine: Some(engine),
        operator,
        rt,
        ops,
        coder: String::new(),
        ci: String::new(),
        rev: String::new(),
        spec: String::new(),
        verifiers: String::new(),
        content: String::new(),
        port: srv.service_port.to_string(),
        requests: Vec::new(),
        _pg: pg,
    };
    let (engine, operator, rt) = (env.engine(), &env.operator, &env.rt);
    let add = |n: &str, r: Role| rt.block_on(engine.add_principal(operator, n, r)).unwrap();
    let (coder, ci, rev) = (
        add("coder", Role::Producer),
        add("ci", Role::Runner),
        add("rev", Role::Verifier),
    );
    let expires: Timestamp = "2099-01-01T00:00:00Z".parse().unwrap();
    for (g, p, a) in [
        ("g-coder", "coder", Access::Write),
        ("g-ci", "ci", Access::Write),
        ("g-rev", "rev", Access::Read),
    ] {
        rt.block_on(engine.grant(operator, g, p, ScopeKind::Mission, "m", a, &expires))
            .unwrap();
    }
    let policy = json!({"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                        "required_checks": ["healthz-ok"], "required_verifiers": ["reviewer"]});
    rt.block_on(engine.set_policy(operator, &policy)).unwrap();
    let producer = env.principal(&coder);
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
        let request = env.rt.block_on(async {
            env.engine().put_subject(&producer, &subject).await.unwrap();
            let request = env
                .engine()
                .create_request_for(&producer, &execution, &json!({}), None)
                .await
                .unwrap();
            env.engine()
                .enqueue_request_jobs(&producer, &request, None)
                .await
                .unwrap();
            request
        });
        env.requests.push(request.to_string());
    }
    env.coder = coder;
    env.ci = ci;
    env.rev = rev;
    env
}

/// Per request: exactly one counted, completed run, whatever was killed, stopped, cut or
/// restarted (every other run ended by a takeover record, without a result), and a passing
/// decision that applies. Returns how many runs were ended by a takeover.
fn one_counted_run_and_a_pass_each(env: &Env, requests: usize) -> usize {
    let mut taken_over = 0;
    for i in 0..requests {
        let execution = format!("ex-{i}");
        let h = env
            .rt
            .block_on(env.engine().history(&env.operator, &execution))
            .unwrap();
        let counted: Vec<_> = h
            .runs
            .iter()
            .filter(|r| r.status == "completed" && r.counted == Some(true))
            .collect();
        assert_eq!(counted.len(), 1, "{execution}: {:?}", h.runs);
        for r in h.runs.iter().filter(|r| r.status != "completed") {
            assert_eq!(r.status, "cancelled", "{execution}: {r:?}");
            assert!(
                r.detail
                    .as_deref()
                    .unwrap_or_default()
                    .contains("was taken over"),
                "{execution}: {r:?}"
            );
            taken_over += 1;
        }
        let status = env
            .rt
            .block_on(env.engine().status(&env.operator, &execution))
            .unwrap();
        let applicable = status.applicable.expect("a decision that applies");
        assert_eq!(
            applicable.decision.outcome.as_str(),
            "pass",
            "{execution}: {applicable:?}"
        );
        let jobs = env.jobs_of(&env.requests[i]);
        assert!(jobs["gate"].2.starts_with("pass "), "{execution}: {jobs:?}");
    }
    taken_over
}

/// How many requests the drain test makes: 300, or fewer by `VERDICT_WORKERS_TEST_REQUESTS`
/// outside CI.
fn requests_to_drain() -> usize {
    let asked = std::env::var("VERDICT_WORKERS_TEST_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    if std::env::var_os("CI").is_some() {
        asked.max(300)
    } else {
        asked
    }
}

/// Every job is done by its first claim: attempts 1, fencing token 1, state done; every gate
/// job passed.
fn each_job_done_by_one_claim(env: &Env) {
    for (id, (kind, state, attempts, fencing, outcome)) in &env.jobs() {
        assert_eq!(
            (state.as_str(), attempts.as_str(), fencing.as_str()),
            ("done", "attempts=1", "fencing=1"),
            "job {id}"
        );
        if kind == "gate" {
            assert!(outcome.starts_with("pass sha256:"), "job {id}: {outcome}");
        }
    }
}

#[test]
fn worker_processes_drain_many_requests_each_job_done_by_one_claim() {
    let requests = requests_to_drain();
    let srv = servers(Vec::new());
    let env = setup(&srv, requests);
    assert_eq!(env.jobs().len(), 3 * requests);
    // Exactly three workers: a runner, a verifier and a gate worker.
    let mut workers = vec![
        env.worker(&env.ci, "runner", "60"),
        env.worker(&env.rev, "verifier", "60"),
        env.worker(&env.ops, "gate", "60"),
    ];
    env.wait_done(3 * requests, &mut workers);
    stop_all(workers);
    each_job_done_by_one_claim(&env);
    assert_eq!(
        srv.calls.load(Ordering::SeqCst),
        requests,
        "one model call per request"
    );
    assert_eq!(one_counted_run_and_a_pass_each(&env, requests), 0);
    let audit = env.run(&env.ops, &["audit", "verify"]);
    assert!(audit.status.success(), "{audit:?}");
}

#[test]
fn racing_verifier_processes_never_do_one_job_twice() {
    const REQUESTS: usize = 24;
    let srv = servers(Vec::new());
    let env = setup(&srv, REQUESTS);
    // Three verifiers race for every verify job.
    let mut workers = vec![
        env.worker(&env.ci, "runner", "60"),
        env.worker(&env.rev, "verifier", "60"),
        env.worker(&env.rev, "verifier", "60"),
        env.worker(&env.rev, "verifier", "60"),
        env.worker(&env.ops, "gate", "60"),
    ];
    env.wait_done(3 * REQUESTS, &mut workers);
    stop_all(workers);
    each_job_done_by_one_claim(&env);
    assert_eq!(
        srv.calls.load(Ordering::SeqCst),
        REQUESTS,
        "one model call per request"
    );
    assert_eq!(one_counted_run_and_a_pass_each(&env, REQUESTS), 0);
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
    first.kill();
    let mut workers = vec![
        runner,
        env.worker(&env.rev, "verifier", "2"),
        env.worker(&env.ops, "gate", "60"),
    ];
    env.wait_done(3, &mut workers);
    stop_all(workers);
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
    stop_all(workers);
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

/// A check that writes the environment it was given next to the worker and fails.
const SPEC_PRINTS_ITS_ENV: &str = r#"
version: 1
vars: {port: "0"}
defaults: {timeout: 5s, interval: 100ms, probe_timeout: 2s, max_age: 10m}
criteria:
  - id: healthz-ok
    mode: assert
    probe: {kind: command, argv: [sh, -c, "env > check-env.txt; exit 1"]}
"#;

#[test]
fn a_check_run_by_the_runner_worker_sees_none_of_the_workers_credentials() {
    let srv = servers(Vec::new());
    let mut env = setup_pinning(&srv, 1, |_| SPEC_PRINTS_ITS_ENV);
    env.spec = env.file("checks.yaml", SPEC_PRINTS_ITS_ENV.as_bytes());
    let out = env
        .command(
            &env.ci,
            &[
                "worker", "--role", "runner", "--once", "--checks", &env.spec, "--var", "port=0",
            ],
        )
        .env("DATABASE_URL", &env.store)
        .env("OPENAI_API_KEY", "sk-worker-provider-key")
        .output()
        .unwrap();
    let seen = std::fs::read_to_string(env.dir.path().join("check-env.txt"))
        .unwrap_or_else(|e| panic!("the check did not run ({e}): {out:?}"));
    assert!(seen.contains("PATH="), "{seen}");
    for secret in [
        env.ci.as_str(),
        env.store.as_str(),
        "sk-worker-provider-key",
        "VERDICT_",
    ] {
        assert!(!seen.contains(secret), "the check saw {secret:?}: {seen}");
    }
}

/// A check whose program detaches a process from its group (setsid) and exits: the process
/// would outlive the check and could change what the next one observes. The runner worker
/// adopts it and kills it when the checks end.
const SPEC_DETACHES: &str = r#"
version: 1
vars: {port: "0"}
defaults: {timeout: 5s, interval: 100ms, probe_timeout: 2s, max_age: 10m}
criteria:
  - id: healthz-ok
    mode: assert
    probe: {kind: command, argv: [sh, -c, "touch check-ran; setsid sh -c 'sleep 2; touch detached-ran' </dev/null >/dev/null 2>&1 & sleep 0.5; exit 1"]}
"#;

#[test]
fn a_process_a_check_detaches_does_not_outlive_the_runner_workers_run() {
    let srv = servers(Vec::new());
    let mut env = setup_pinning(&srv, 1, |_| SPEC_DETACHES);
    env.spec = env.file("checks.yaml", SPEC_DETACHES.as_bytes());
    let out = env
        .command(
            &env.ci,
            &[
                "worker", "--role", "runner", "--once", "--checks", &env.spec, "--var", "port=0",
            ],
        )
        .output()
        .unwrap();
    assert!(
        env.dir.path().join("check-ran").exists(),
        "the check did not run: {out:?}"
    );
    std::thread::sleep(Duration::from_millis(3000));
    assert!(
        !env.dir.path().join("detached-ran").exists(),
        "the detached process outlived the worker's checks: {out:?}"
    );
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
    let runner = env.worker(&env.ci, "runner", "3");
    let gate = env.worker(&env.ops, "gate", "3");
    let mut killed = env.worker(&env.rev, "verifier", "2");
    wait_calls(&srv, &env, 1);
    killed.kill();
    let mut stopped = env.worker_with(&env.rev, "verifier", "2", Stdio::piped(), Stdio::inherit());
    wait_calls(&srv, &env, 2);
    stopped.signal("-STOP");
    let mut workers = vec![
        runner,
        gate,
        env.worker(&env.rev, "verifier", "2"),
        env.worker(&env.rev, "verifier", "2"),
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
    stopped.signal("-CONT");
    srv.release.store(true, Ordering::SeqCst);
    let stdout = stopped.child().stdout.take().unwrap();
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
    stop_all(workers);
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
    assert!(one_counted_run_and_a_pass_each(&env, REQUESTS) >= 2);
    let audit = env.run(&env.ops, &["audit", "verify"]);
    assert!(audit.status.success(), "{audit:?}");
}

/// A PostgreSQL cluster of this test's own (the shared test server is never restarted): made
/// with `initdb` in a temporary directory, trust authentication, listening on a free port of
/// 127.0.0.1 with its socket in that directory, `fsync` on. Stopped and removed when dropped,
/// also when the test panics.
struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl Cluster {
    /// The directory of the server's programs: `pg_config --bindir`, else the newest
    /// `/usr/lib/postgresql/*/bin`; `None` when neither holds `initdb` and `pg_ctl`.
    fn programs() -> Option<PathBuf> {
        let has = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
        let from_pg_config = Command::new("pg_config")
            .arg("--bindir")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
        if let Some(d) = from_pg_config.filter(|d| has(d)) {
            return Some(d);
        }
        let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| {
                let e = e.ok()?;
                let version = e.file_name().to_str()?.parse().ok()?;
                Some((version, e.path().join("bin")))
            })
            .filter(|(_, d)| has(d))
            .collect();
        found.sort();
        found.pop().map(|(_, d)| d)
    }

    /// Starts a cluster, or `None` (with `skipped:` printed) when the server's programs are
    /// not installed; with `CI` set their absence fails the test instead.
    fn start() -> Option<Self> {
        let Some(bin) = Self::programs() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "the PostgreSQL server programs (initdb, pg_ctl) are not installed"
            );
            println!("skipped: the PostgreSQL server programs (initdb, pg_ctl) are not installed");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        // PostgreSQL refuses to run as root: the cluster's commands then run as `postgres`,
        // which must own the directory.
        if Self::root() {
            let status = Command::new("chown")
                .args(["postgres", &dir.path().display().to_string()])
                .status()
                .unwrap();
            assert!(status.success(), "chown postgres {}", dir.path().display());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cluster = Self { bin, dir, port };
        let data = cluster.data();
        cluster.ok(
            "initdb",
            &["-D", &data, "-U", "postgres", "--auth=trust", "--no-sync"],
        );
        let conf = format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             fsync = on\nmax_connections = 40\nshared_buffers = 16MB\n",
            cluster.dir.path().display()
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(cluster.dir.path().join("data").join("postgresql.conf"))
            .unwrap();
        std::io::Write::write_all(&mut file, conf.as_bytes()).unwrap();
        cluster.ok(
            "pg_ctl",
            &["-D", &data, "-l", &cluster.log(), "-w", "start"],
        );
        Some(cluster)
    }

    fn root() -> bool {
        Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn log(&self) -> String {
        self.dir.path().join("server.log").display().to_string()
    }

    /// One of the server's programs, as `postgres` when this test runs as root.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let program = self.bin.join(program);
        let mut cmd = if Self::root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        cmd.args(args).stdin(Stdio::null());
        cmd
    }

    fn ok(&self, program: &str, args: &[&str]) {
        let out = self.command(program, args).output().unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.log()).unwrap_or_default()
        );
    }

    /// The database `postgres` as the superuser.
    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server process's id, from its `postmaster.pid`.
    fn server_pid(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("data").join("postmaster.pid"))
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_owned()
    }

    /// Stops the server as a crash would (`immediate`): every process exits at once, with no
    /// checkpoint, so the next start recovers from the WAL alone; whatever a worker was told is
    /// stored must survive this.
    fn crash(&self) {
        let data = self.data();
        self.ok("pg_ctl", &["-D", &data, "-w", "-m", "immediate", "stop"]);
    }

    /// Starts the server again, waiting until it takes connections.
    fn start_again(&self) {
        let data = self.data();
        self.ok("pg_ctl", &["-D", &data, "-l", &self.log(), "-w", "start"]);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self
            .command("pg_ctl", &["-D", &data, "-w", "-m", "immediate", "stop"])
            .output();
    }
}

/// A worker's log (its standard error) says it found the database away.
const AWAY: &str = "the database is unavailable; trying again";

/// A worker's log says the database answered again.
const BACK: &str = "the database is back";

fn read_log(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

#[test]
fn workers_on_a_crashed_and_restarted_postgres_lose_nothing_and_do_nothing_twice() {
    const REQUESTS: usize = 40;
    let Some(cluster) = Cluster::start() else {
        return;
    };
    // Each model answer takes a moment, so that a verify job is in flight when the server
    // goes down.
    let srv = servers_with(Vec::new(), None, Duration::from_millis(100));
    let env = setup_in(&srv, REQUESTS, |_| SPEC, cluster.url(), None);
    let logs: Vec<PathBuf> = ["runner", "verifier", "gate"]
        .iter()
        .map(|r| env.dir.path().join(format!("{r}.log")))
        .collect();
    let log = |i: usize| Stdio::from(std::fs::File::create(&logs[i]).unwrap());
    let mut workers = vec![
        env.worker_with(&env.ci, "runner", "4", Stdio::null(), log(0)),
        env.worker_with(&env.rev, "verifier", "4", Stdio::null(), log(1)),
        env.worker_with(&env.ops, "gate", "4", Stdio::null(), log(2)),
    ];
    // Mid-drain: a third of the jobs done and at least one running.
    let start = Instant::now();
    loop {
        let jobs = env.jobs();
        let count = |s: &str| jobs.values().filter(|(_, state, ..)| state == s).count();
        if count("done") >= REQUESTS && count("running") > 0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(300), "{jobs:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The server crashes, and stays down until a worker has found it away: the driver
    // waits for a connection for up to 30 seconds before it reports the database away, so
    // the restart also outlasts every lease (4 seconds) taken before it.
    let before = cluster.server_pid();
    cluster.crash();
    let down = Instant::now();
    while !logs.iter().any(|l| read_log(l).contains(AWAY)) {
        for w in &mut workers {
            if let Some(status) = w.child().try_wait().unwrap() {
                panic!("a worker exited while the database was down: {status}");
            }
        }
        assert!(
            down.elapsed() < Duration::from_secs(180),
            "no worker found the database away"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    cluster.start_again();
    assert_ne!(cluster.server_pid(), before, "the server was restarted");
    env.wait_done(3 * REQUESTS, &mut workers);
    stop_all(workers);
    // No worker exited while the database was away, and each that found it away saw it back.
    for l in &logs {
        let text = read_log(l);
        assert!(
            !text.contains(AWAY) || text.contains(BACK),
            "{}: {text}",
            l.display()
        );
    }
    // Each job ended done exactly once: by its first claim, or by a later one when the claim
    // in hand was lost with the restart (every claim counted, none beyond the attempts cap).
    let jobs = env.jobs();
    // Claims beyond the first, over all jobs.
    let mut retried = 0;
    for (id, (kind, state, attempts, fencing, outcome)) in &jobs {
        assert_eq!(state, "done", "job {id}: {outcome}");
        let n: i64 = attempts["attempts=".len()..].parse().unwrap();
        assert!((1..=5).contains(&n), "job {id}: {attempts}");
        assert_eq!(fencing, &format!("fencing={n}"), "job {id}");
        retried += usize::try_from(n - 1).unwrap();
        if kind == "gate" {
            assert!(outcome.starts_with("pass sha256:"), "job {id}: {outcome}");
        }
    }
    // Nothing lost, nothing done twice: each request has its one counted result and a passing
    // decision; a verify job retried after the restart ended its earlier claim's run without a
    // result (a takeover record), or completed with the result that run had stored.
    let taken_over = one_counted_run_and_a_pass_each(&env, REQUESTS);
    assert!(
        taken_over <= retried,
        "{taken_over} runs taken over, {retried} claims beyond the first"
    );
    let calls = srv.calls.load(Ordering::SeqCst);
    assert!(
        (REQUESTS..=REQUESTS + retried).contains(&calls),
        "{calls} model calls for {REQUESTS} requests and {retried} claims beyond the first"
    );
    // Every request's checks evidence is stored (the Gate passed on it) and the audit chain
    // holds across the restart.
    let audit = env.run(&env.ops, &["audit", "verify"]);
    assert!(audit.status.success(), "{audit:?}");
    drop(env);
    drop(cluster);
}

#[test]
fn a_worker_whose_database_never_answers_gives_up_after_the_bound_naming_why() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("postgres://postgres@127.0.0.1:{port}/verdict");
    let out = Worker(Some(
        Command::new(env!("CARGO_BIN_EXE_verdict"))
            .args(["worker", "--role", "gate", "--give-up-after", "2s"])
            .current_dir(dir.path())
            .env("VERDICT_STORE", &url)
            .env("VERDICT_HOME", dir.path())
            .env("VERDICT_TOKEN", "vdt_nobody")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ))
    .wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("verdict: worker: giving up: the database has been unavailable for")
            && stderr.contains("past --give-up-after (2.0s)")
            && stderr.contains(&format!("last error: no answer from the database at {url}")),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
}
