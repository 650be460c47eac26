//! Workers: a request taken to a decision through `Engine::work_one` calls alone (a runner
//! filing check evidence, a verifier against a fake OpenAI-compatible server on loopback, the
//! gate), each job done once; a worker of the wrong role refused as a denial; and a stalled
//! worker's job taken over, its late completion refused and its run never admitted. On both
//! backends.

use crate::common::{
    EXEC, World, allow_job_ends, evidence, on_both, on_both_at, refuse_job_ends, world,
};
use crate::verify::{DIFF, OBJECTIVE, Reply, answer, fake, inputs, verifiers};
use async_trait::async_trait;
use axum::Router;
use axum::extract::State;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use verdict_core::contracts::Subject;
use verdict_core::digest::Digest;
use verdict_engine::{
    ChecksKit, ChecksRun, ClassSource, DEFAULT_BACK_OFF, EngineError, JobFailure, MAX_ATTEMPTS,
    Principal, VerifierKit, VerifyError, VerifyInputs, VerifyOptions, WorkOptions, Worked,
    WorkerRole,
};
use verdict_judge::config::{ResolvedClass, VerifiersFile};
use verdict_store::{About, Actor, DocKind, JobClaim, JobFilter, JobKind, JobState, StoreError};

struct Classes(VerifiersFile);

/// Moves the store's manual clock `by` forward. The queue keeps the store's time, so on the
/// tests' manual clock a lease lapses, or a back-off ends, only when the test says so.
async fn advance(w: &World, by: Duration) {
    advance_engine(&w.engine, by).await;
}

/// [`advance`] on `engine`'s store handle.
async fn advance_engine(engine: &verdict_engine::Engine, by: Duration) {
    let now = engine.store().now().await.unwrap();
    let later = verdict_core::contracts::Timestamp::from_unix_nanos(
        now.unix_nanos() + i128::try_from(by.as_nanos()).unwrap(),
    );
    engine.set_manual_time(&later).await.unwrap();
}

impl ClassSource for Classes {
    fn resolve(&self, name: &str) -> Result<ResolvedClass, String> {
        self.0
            .class(name, Path::new("."))
            .map_err(|e| e.to_string())
    }
}

struct Verifier {
    classes: Classes,
    asked: AtomicUsize,
}

#[async_trait]
impl VerifierKit for Verifier {
    async fn inputs(&self, _subject: &Subject) -> Result<VerifyInputs, String> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(inputs())
    }
    fn classes(&self) -> &dyn ClassSource {
        &self.classes
    }
}

/// Passing evidence for the subject's one check, naming the calling runner (the engine files
/// it under the job's claim).
struct Runner {
    runs: AtomicUsize,
}

#[async_trait]
impl ChecksKit for Runner {
    async fn run_checks(
        &self,
        caller: &Principal,
        _subject: &Subject,
        subject_digest: &Digest,
    ) -> Result<ChecksRun, JobFailure> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(one_passing_check(caller, subject_digest))
    }
}

fn options(url: &str) -> (WorkOptions, Arc<Verifier>, Arc<Runner>) {
    let verifier = Arc::new(Verifier {
        classes: Classes(verifiers(url, false)),
        asked: AtomicUsize::new(0),
    });
    let runner = Arc::new(Runner {
        runs: AtomicUsize::new(0),
    });
    let o = WorkOptions {
        holder: "test-worker".into(),
        lease: Duration::from_secs(60),
        verifier: Some(verifier.clone()),
        checks: Some(runner.clone()),
        back_off: DEFAULT_BACK_OFF,
    };
    (o, verifier, runner)
}

/// The producer's subject (pinning the objective and the diff) and request; no evidence yet.
async fn requested(w: &World) -> Digest {
    requested_with(w, json!({})).await
}

/// The producer's subject, pinning the objective and the diff.
async fn subject_put(w: &World) {
    let mut subject = crate::common::subject(1, DIFF);
    subject["objective"]["digest"] = json!(verdict_core::digest::raw(OBJECTIVE.as_bytes()));
    w.engine.put_subject(&w.coder, &subject).await.unwrap();
}

/// [`requested`] with the request's `budget`.
async fn requested_with(w: &World, budget: serde_json::Value) -> Digest {
    subject_put(w).await;
    w.engine
        .create_request(&w.coder, EXEC, &budget)
        .await
        .unwrap()
}

/// Enqueues `req`'s jobs as its subject's producer and has the runner do its checks job;
/// returns the options the workers go on with (the fake model at `url`).
async fn checked(w: &World, req: &Digest, url: &str) -> WorkOptions {
    w.engine
        .enqueue_request_jobs(&w.coder, req, None)
        .await
        .unwrap();
    let (o, _, _) = options(url);
    done(
        &w.engine
            .work_one(&w.ci, WorkerRole::Runner, &o)
            .await
            .unwrap(),
    );
    o
}

/// `rev` as the store names it, to claim a job by hand.
fn rev_actor(w: &World) -> Actor {
    Actor::new(
        w.rev.name().as_str(),
        verdict_core::contracts::Role::Verifier,
    )
}

/// The gate worker takes the request's gate job, and the Gate passes.
async fn gated_pass(w: &World, o: &WorkOptions) {
    let gated = w
        .engine
        .work_one(&w.ops, WorkerRole::Gate, o)
        .await
        .unwrap();
    let outcome = done(&gated).outcome.clone().unwrap();
    assert!(outcome.starts_with("pass sha256:"), "{outcome}");
}

/// `caller` works a job of `role` as soon as one is ready (within ten seconds).
async fn until_worked(w: &World, caller: &Principal, role: WorkerRole, o: &WorkOptions) -> Worked {
    for _ in 0..1000 {
        let worked = w.engine.work_one(caller, role, o).await.unwrap();
        if worked != Worked::Idle {
            return worked;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no {} job was ready", role.as_str());
}

fn done(w: &Worked) -> &verdict_store::Job {
    match w {
        Worked::Done(job) => {
            assert_eq!(job.state, JobState::Done, "{job:?}");
            job
        }
        other => panic!("not done: {other:?}"),
    }
}

/// A request created with its jobs (`Engine::create_request_enqueued`) is stored with them in
/// one transaction and the workers alone take it to a decision. Only an operator or the
/// producer of the execution's subject may: a verifier, or a producer holding a write grant on
/// the execution that did not produce its subject, is refused with nothing written but the
/// denial, neither the request nor a job; asked again, the same request answers with the same
/// jobs.
/// What a runner kit reports for a subject whose one check passed: that check's evidence, as
/// `caller` files it.
fn one_passing_check(caller: &Principal, subject_digest: &Digest) -> ChecksRun {
    ChecksRun {
        evidence: vec![evidence(
            subject_digest,
            "pass",
            caller.name().as_str(),
            "runner",
        )],
        outcome: "1 check".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_created_with_its_jobs_is_worked_to_a_decision_and_only_its_producer_may() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        subject_put(&w).await;
        let token = w
            .engine
            .add_principal(
                &w.ops,
                "coder-2",
                serde_json::from_value(json!("producer")).unwrap(),
            )
            .await
            .unwrap();
        let other = w.engine.authenticate(&token).await.unwrap();
        w.engine
            .grant(
                &w.ops,
                "g-coder-2",
                "coder-2",
                verdict_store::ScopeKind::Execution,
                EXEC,
                verdict_store::Access::Write,
                &"2027-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        let budget = json!({});
        for (caller, why) in [
            (&w.rev, "may not"),
            (&other, "only an operator or the producer"),
        ] {
            let before = audit_len(&w).await;
            let err = w
                .engine
                .create_request_enqueued(caller, EXEC, &budget, None, None)
                .await
                .unwrap_err();
            assert!(err.to_string().contains(why), "{err}");
            assert_eq!(audit_len(&w).await, before + 1, "the denial alone");
            assert!(
                w.engine
                    .jobs(&w.ops, &JobFilter::default())
                    .await
                    .unwrap()
                    .is_empty()
            );
        }
        let (req, jobs) = w
            .engine
            .create_request_enqueued(
                &w.coder,
                EXEC,
                &budget,
                None,
                Some(Duration::from_secs(600)),
            )
            .await
            .unwrap();
        assert_eq!(
            jobs.iter()
                .map(|j| (j.kind, j.class.as_str(), &j.request))
                .collect::<Vec<_>>(),
            [
                (JobKind::Checks, "", &req),
                (JobKind::Verify, "reviewer", &req),
                (JobKind::Gate, "", &req),
            ]
        );
        assert!(jobs[2].deadline_at.is_some());
        // The same request, asked for again, answers with the same jobs.
        let (again, same) = w
            .engine
            .create_request_enqueued(&w.ops, EXEC, &budget, None, Some(Duration::from_secs(600)))
            .await
            .unwrap();
        assert_eq!((&again, &same), (&req, &jobs));
        let (o, _, _) = options(&srv.url);
        for (p, role) in [
            (&w.ci, WorkerRole::Runner),
            (&w.rev, WorkerRole::Verifier),
            (&w.ops, WorkerRole::Gate),
        ] {
            done(&w.engine.work_one(p, role, &o).await.unwrap());
        }
        let status = w.engine.status(&w.coder, EXEC).await.unwrap();
        assert_eq!(
            status.applicable.map(|d| d.decision.outcome.as_str()),
            Some("pass")
        );
    })
    .await;
}

/// A verify job's and a gate job's last effects are written in the transaction that ends the
/// job: while the database refuses to mark any job done, a verifier's run is admitted and
/// started but never ended, no decision is stored, and each job's attempt fails with nothing of
/// its last effect left behind (with the job ended in a transaction of its own, the run's end
/// and the decision would be stored and only the ends refused). Once the database takes job
/// ends again, the retries take the request to its decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_last_effect_is_undone_with_its_refused_end() {
    on_both_at(|store, location| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w).await;
        let mut o = checked(&w, &req, &srv.url).await;
        o.back_off = Duration::from_millis(1);
        refuse_job_ends(&location).await;
        let runs = |w: &World| {
            let (engine, ops) = (w.engine.clone(), w.ops.clone());
            async move { engine.history(&ops, EXEC).await.unwrap().runs }
        };
        let failed = w
            .engine
            .work_one(&w.rev, WorkerRole::Verifier, &o)
            .await
            .unwrap();
        assert!(matches!(failed, Worked::Failed { .. }), "{failed:?}");
        let first = runs(&w).await;
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(
            first[0].status.as_str(),
            "started",
            "the run's end went with the job's"
        );
        let results = w
            .engine
            .store()
            .list(DocKind::Verification, &About::Execution(EXEC.into()))
            .await
            .unwrap();
        assert_eq!(
            results.len(),
            1,
            "the result, written before the run's end, stands"
        );
        allow_job_ends(&location).await;
        // The retry is ready after its back-off, on the store's (manual) clock.
        let later = |at: &str| {
            let (engine, at) = (w.engine.clone(), at.to_owned());
            async move {
                engine
                    .store()
                    .set_manual_time(&at.parse().unwrap())
                    .await
                    .unwrap();
            }
        };
        later("2026-11-30T12:00:01Z").await;
        // The retry's claim ends the first attempt's run (a takeover) and runs its own; then
        // the gate job, failed once the same way, stores no decision.
        let verified = until_worked(&w, &w.rev, WorkerRole::Verifier, &o).await;
        done(&verified);
        refuse_job_ends(&location).await;
        let failed = w
            .engine
            .work_one(&w.ops, WorkerRole::Gate, &o)
            .await
            .unwrap();
        assert!(matches!(failed, Worked::Failed { .. }), "{failed:?}");
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        assert!(
            status.applicable.is_none() && status.latest.is_none(),
            "no decision was stored: {status:?}"
        );
        allow_job_ends(&location).await;
        later("2026-11-30T12:00:02Z").await;
        let gated = until_worked(&w, &w.ops, WorkerRole::Gate, &o).await;
        let outcome = done(&gated).outcome.clone().unwrap();
        assert!(outcome.starts_with("pass sha256:"), "{outcome}");
    })
    .await;
}

/// A worker's verification ends its job with the write that ends its run: the verify job is
/// done, with its outcome, when the verification returns, though nobody completed it after;
/// the claim then holds nothing, and the gate job that waited for it is worked at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_verification_ends_its_job_with_the_write_that_ends_its_run() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w).await;
        let o = checked(&w, &req, &srv.url).await;
        let rev = rev_actor(&w);
        let lease = Duration::from_secs(60);
        let queue = w.engine.store().queue();
        let job = queue
            .claim_job(&rev, JobKind::Verify, "by-hand", lease)
            .await
            .unwrap()
            .unwrap();
        let run = format!("job-{}-{}", job.id, job.fencing);
        let options = VerifyOptions {
            classes: vec!["reviewer".into()],
            run_id: Some(run.parse().unwrap()),
            claim: Some(JobClaim::new(job.id, job.fencing, lease)),
            complete_job: true,
            ..VerifyOptions::default()
        };
        let classes = Classes(verifiers(&srv.url, false));
        let runs = w
            .engine
            .verify_request(&w.rev, &req, &inputs(), &classes, &options)
            .await
            .unwrap();
        assert_eq!(runs.len(), 1);
        assert!(runs[0].completed() && runs[0].job_completed(), "{runs:?}");
        let ended = queue.job(job.id).await.unwrap().unwrap();
        assert_eq!(
            (ended.state, ended.fencing, ended.outcome.as_deref()),
            (
                JobState::Done,
                job.fencing,
                Some(format!("{run} completed").as_str())
            )
        );
        let err = queue
            .complete_job(&rev, job.id, job.fencing, "again")
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::StaleClaim { .. }), "{err}");
        gated_pass(&w, &o).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_reaches_a_decision_through_workers_alone_each_job_done_once() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w).await;
        let jobs = w
            .engine
            .enqueue_request_jobs(&w.coder, &req, None)
            .await
            .unwrap();
        let kinds: Vec<JobKind> = jobs.iter().map(|j| j.kind).collect();
        assert_eq!(kinds, [JobKind::Checks, JobKind::Verify, JobKind::Gate]);
        assert_eq!(jobs[1].class, "reviewer");
        // Enqueuing again, even by the operator, adds nothing.
        let again = w
            .engine
            .enqueue_request_jobs(&w.ops, &req, None)
            .await
            .unwrap();
        assert_eq!(
            again.iter().map(|j| j.id).collect::<Vec<_>>(),
            jobs.iter().map(|j| j.id).collect::<Vec<_>>()
        );
        let (o, verifier, runner) = options(&srv.url);
        // The gate waits for the others, the verifier for the checks.
        assert_eq!(
            w.engine
                .work_one(&w.ops, WorkerRole::Gate, &o)
                .await
                .unwrap(),
            Worked::Idle
        );
        assert_eq!(
            w.engine
                .work_one(&w.rev, WorkerRole::Verifier, &o)
                .await
                .unwrap(),
            Worked::Idle
        );
        let checks = w
            .engine
            .work_one(&w.ci, WorkerRole::Runner, &o)
            .await
            .unwrap();
        assert_eq!(done(&checks).outcome.as_deref(), Some("1 check"));
        assert_eq!(
            w.engine
                .work_one(&w.ops, WorkerRole::Gate, &o)
                .await
                .unwrap(),
            Worked::Idle
        );
        let verified = w
            .engine
            .work_one(&w.rev, WorkerRole::Verifier, &o)
            .await
            .unwrap();
        let job = done(&verified);
        let run = format!("job-{}-1", job.id);
        assert_eq!(
            job.outcome.as_deref(),
            Some(format!("{run} completed").as_str())
        );
        let gated = w
            .engine
            .work_one(&w.ops, WorkerRole::Gate, &o)
            .await
            .unwrap();
        let outcome = done(&gated).outcome.clone().unwrap();
        assert!(outcome.starts_with("pass sha256:"), "{outcome}");
        // Nothing is left, and each job was done by exactly one claim.
        for (p, role) in [
            (&w.ci, WorkerRole::Runner),
            (&w.rev, WorkerRole::Verifier),
            (&w.ops, WorkerRole::Gate),
        ] {
            assert_eq!(w.engine.work_one(p, role, &o).await.unwrap(), Worked::Idle);
        }
        let all = w
            .engine
            .store()
            .queue()
            .jobs(&JobFilter::default())
            .await
            .unwrap();
        assert!(
            all.iter()
                .all(|j| j.state == JobState::Done && j.attempts == 1 && j.fencing == 1),
            "{all:?}"
        );
        assert_eq!(runner.runs.load(Ordering::SeqCst), 1);
        assert_eq!(verifier.asked.load(Ordering::SeqCst), 1);
        assert_eq!(srv.calls.load(Ordering::SeqCst), 1);
        let status = w.engine.status(&w.ops, EXEC).await.unwrap();
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        assert_eq!(history.runs.len(), 1);
        assert_eq!(history.runs[0].run_id, run);
        assert_eq!(history.runs[0].status, "completed");
        let shown = format!("{status:?}");
        assert!(shown.contains("pass"), "{shown}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_of_the_wrong_role_a_stranger_enqueuing_or_reading_the_queue_is_refused() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = requested(&w).await;
        let (o, _, _) = options("http://127.0.0.1:9/v1");
        for (p, role) in [
            (&w.coder, WorkerRole::Gate),
            (&w.rev, WorkerRole::Gate),
            (&w.ci, WorkerRole::Verifier),
            (&w.rev, WorkerRole::Runner),
            (&w.ops, WorkerRole::Verifier),
        ] {
            let err = w.engine.work_one(p, role, &o).await.unwrap_err();
            assert_eq!(err.code(), "permission_denied", "{err}");
            let denials = w
                .engine
                .store()
                .denials_of(p.name().as_str())
                .await
                .unwrap();
            assert!(!denials.is_empty());
        }
        for p in [&w.rev, &w.ci, &w.alice] {
            let err = w
                .engine
                .enqueue_request_jobs(p, &req, None)
                .await
                .unwrap_err();
            assert_eq!(err.code(), "permission_denied", "{err}");
        }
        assert!(
            w.engine
                .store()
                .queue()
                .jobs(&JobFilter::default())
                .await
                .unwrap()
                .is_empty()
        );
        // Only operators read the queue: it names requests of every execution.
        for p in [&w.coder, &w.rev, &w.ci] {
            let err = w.engine.jobs(p, &JobFilter::default()).await.unwrap_err();
            assert_eq!(err.code(), "permission_denied", "{err}");
        }
        assert!(
            w.engine
                .jobs(&w.ops, &JobFilter::default())
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_workers_job_is_taken_over_and_its_late_completion_refused() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w).await;
        let o = checked(&w, &req, &srv.url).await;
        // A worker claims the verify job with a millisecond's lease, then stalls (a
        // paused process, say): it never renews and never gets to its work.
        let stalled = rev_actor(&w);
        let old = w
            .engine
            .store()
            .queue()
            .claim_job(
                &stalled,
                JobKind::Verify,
                "stalled",
                Duration::from_millis(1),
            )
            .await
            .unwrap()
            .unwrap();
        advance(&w, Duration::from_secs(1)).await;
        // Another verifier takes the job over and does it.
        let taken = w
            .engine
            .work_one(&w.rev2, WorkerRole::Verifier, &o)
            .await
            .unwrap();
        let job = done(&taken);
        assert_eq!((job.id, job.fencing, job.attempts), (old.id, 2, 2));
        // The stalled worker wakes up: its completion is refused, and the job keeps the one
        // outcome of the claim that holds.
        let err = w
            .engine
            .store()
            .queue()
            .complete_job(&stalled, old.id, old.fencing, "late")
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::StaleClaim { .. }), "{err}");
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        let runs: Vec<&str> = history.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(
            runs,
            [format!("job-{}-2", job.id).as_str()],
            "one run, the holder's"
        );
        assert_eq!(srv.calls.load(Ordering::SeqCst), 1);
        gated_pass(&w, &o).await;
    })
    .await;
}

/// A fake provider whose first call is answered only once `gate` gives a permit; `arrived`
/// counts the calls that reached it.
struct Gated {
    url: String,
    arrived: Arc<AtomicUsize>,
    gate: Arc<tokio::sync::Semaphore>,
}

type GatedState = (
    Arc<tokio::sync::Semaphore>,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
);

async fn gated_answer(
    State((gate, arrived, calls)): State<GatedState>,
    body: axum::body::Bytes,
) -> axum::Json<serde_json::Value> {
    if arrived.fetch_add(1, Ordering::SeqCst) == 0 {
        gate.acquire().await.unwrap().forget();
    }
    answer(State((Reply::Pass, calls)), body).await
}

async fn gated() -> Gated {
    let (gate, arrived) = (
        Arc::new(tokio::sync::Semaphore::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = Router::new().fallback(gated_answer).with_state((
        gate.clone(),
        arrived.clone(),
        Arc::new(AtomicUsize::new(0)),
    ));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Gated { url, arrived, gate }
}

/// How many audit events the store holds: a refusal that writes nothing leaves it unchanged.
async fn audit_len(w: &World) -> u64 {
    w.engine
        .store()
        .audit_head()
        .await
        .unwrap()
        .map_or(0, |h| h.seq)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_lost_its_job_mid_call_cannot_submit_and_its_run_gives_its_place_back() {
    on_both(|store| async move {
        let srv = gated().await;
        let w = world(store).await;
        // One run allowed: the stalled worker's run must not use it up for good.
        let req = requested_with(&w, json!({"max_runs": 1})).await;
        let o = checked(&w, &req, &srv.url).await;
        // The first worker claims the verify job with a millisecond's lease and never
        // renews it (a paused process): it admits its run and is stuck in the model call.
        let stalled = rev_actor(&w);
        let lease = Duration::from_millis(1);
        let old = w
            .engine
            .store()
            .queue()
            .claim_job(&stalled, JobKind::Verify, "stalled", lease)
            .await
            .unwrap()
            .unwrap();
        let old_run = format!("job-{}-1", old.id);
        let first = {
            let (engine, rev, req, url) = (
                w.engine.clone(),
                w.rev.clone(),
                req.clone(),
                srv.url.clone(),
            );
            let old_run = old_run.clone();
            tokio::spawn(async move {
                let options = VerifyOptions {
                    classes: vec!["reviewer".into()],
                    cache: None,
                    run_id: Some(old_run.parse().unwrap()),
                    claim: Some(JobClaim::new(old.id, old.fencing, lease)),
                    // As a worker's verification does: its run's end would complete the job.
                    complete_job: true,
                };
                let classes = Classes(verifiers(&url, false));
                engine
                    .verify_request(&rev, &req, &inputs(), &classes, &options)
                    .await
            })
        };
        while srv.arrived.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        advance(&w, Duration::from_secs(1)).await;
        // Another worker takes the job over: it ends the stalled run, and its own run is
        // admitted although the request allows one run only.
        let taken = w
            .engine
            .work_one(&w.rev2, WorkerRole::Verifier, &o)
            .await
            .unwrap();
        let job = done(&taken).clone();
        assert_eq!((job.id, job.fencing), (old.id, 2));
        let new_run = format!("job-{}-2", job.id);
        assert_eq!(
            job.outcome.as_deref(),
            Some(format!("{new_run} completed").as_str())
        );
        // The stalled worker's model answers now: its submission is refused, and nothing at
        // all is written.
        let before = audit_len(&w).await;
        srv.gate.add_permits(1);
        let err = first.await.unwrap().unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::Engine(EngineError::Store(StoreError::StaleClaim {
                    fencing: 1,
                    ..
                }))
            ),
            "{err}"
        );
        assert_eq!(
            audit_len(&w).await,
            before,
            "a refused submission writes nothing"
        );
        let subject = w.engine.history(&w.ops, EXEC).await.unwrap().runs[0]
            .subject_digest
            .parse::<Digest>()
            .unwrap();
        let results = w
            .engine
            .store()
            .list(DocKind::Verification, &About::Subject(subject))
            .await
            .unwrap();
        assert_eq!(results.len(), 1, "one result, the new claim's");
        let r: verdict_core::contracts::VerificationResult = results[0].decode().unwrap();
        assert_eq!(r.verifier.run.as_str(), new_run);
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        let runs: Vec<(&str, &str)> = history
            .runs
            .iter()
            .map(|r| (r.run_id.as_str(), r.status.as_str()))
            .collect();
        assert_eq!(
            runs,
            [
                (old_run.as_str(), "cancelled"),
                (new_run.as_str(), "completed")
            ]
        );
        let why = history.runs[0].detail.clone().unwrap();
        assert!(why.contains("taken over by rev2"), "{why}");
        assert_eq!(history.runs[1].counted, Some(true));
        gated_pass(&w, &o).await;
    })
    .await;
}

/// Fails every attempt, counting them.
struct Failing {
    attempts: AtomicUsize,
}

#[async_trait]
impl ChecksKit for Failing {
    async fn run_checks(
        &self,
        _caller: &Principal,
        _subject: &Subject,
        _subject_digest: &Digest,
    ) -> Result<ChecksRun, JobFailure> {
        let n = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        Err(format!("probe target down (attempt {n})").into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_job_is_retried_after_a_back_off_then_given_up_and_the_gate_runs() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = requested(&w).await;
        w.engine
            .enqueue_request_jobs(&w.coder, &req, None)
            .await
            .unwrap();
        let kit = Arc::new(Failing {
            attempts: AtomicUsize::new(0),
        });
        let o = WorkOptions {
            holder: "test-worker".into(),
            lease: Duration::from_secs(60),
            verifier: None,
            checks: Some(kit.clone()),
            // The store's manual clock is moved on by the test while nothing is claimable.
            back_off: Duration::from_millis(20),
        };
        let mut seen = Vec::new();
        let mut not_before = Vec::new();
        loop {
            match w
                .engine
                .work_one(&w.ci, WorkerRole::Runner, &o)
                .await
                .unwrap()
            {
                // Not ready again before its back-off.
                Worked::Idle => advance(&w, Duration::from_millis(20)).await,
                Worked::Failed { job, why } => {
                    if let (JobState::Ready, Some(at)) = (job.state, &job.not_before) {
                        not_before.push(at.unix_nanos());
                    }
                    seen.push((job.attempts, job.state, job.not_before.is_some(), why));
                    if job.state == JobState::Failed {
                        break;
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        let attempts = usize::try_from(MAX_ATTEMPTS).unwrap();
        assert_eq!(seen.len(), attempts);
        for (i, (n, state, backed_off, why)) in seen.iter().enumerate() {
            assert_eq!(*n, i64::try_from(i).unwrap() + 1);
            assert!(why.contains(&format!("attempt {n}")), "{why}");
            if i + 1 < attempts {
                assert_eq!((*state, *backed_off), (JobState::Ready, true));
            } else {
                assert_eq!(*state, JobState::Failed, "given up after the last attempt");
            }
        }
        assert_eq!(kit.attempts.load(Ordering::SeqCst), attempts);
        // Each retry was claimed only after its back-off, and each back-off doubles the one
        // before: attempt k+1 failed after not_before(k), so not_before(k+1) is at least
        // 20 ms x 2^k later.
        for (k, pair) in not_before.windows(2).enumerate() {
            let gap = pair[1] - pair[0];
            let least = 20_000_000_i128 * (1 << (k + 1));
            assert!(gap >= least, "back-off {k}: {gap} ns < {least} ns");
        }
        // Given up is finished: no one claims it again, and the operator sees why.
        assert_eq!(
            w.engine
                .work_one(&w.ci, WorkerRole::Runner, &o)
                .await
                .unwrap(),
            Worked::Idle
        );
        let failed = w
            .engine
            .jobs(
                &w.ops,
                &JobFilter {
                    state: Some(JobState::Failed),
                    ..JobFilter::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].kind, JobKind::Checks);
        assert!(
            failed[0]
                .last_error
                .as_deref()
                .unwrap()
                .contains("attempt 5")
        );
        // The verify job waited for the checks job only until it finished; the gate job
        // waits for the verify job in turn.
        assert_eq!(
            w.engine
                .work_one(&w.ops, WorkerRole::Gate, &o)
                .await
                .unwrap(),
            Worked::Idle
        );
    })
    .await;
}

/// Pauses its thread (as a stopped process would, renewing nothing) past its lease, then
/// hands evidence to be filed; `wrote` counts the evidence it handed over.
/// Holds its worker's task (so the worker's own renewals cannot run either) until the test has
/// taken the job over, then lets the worker go on, when its next renewal finds the job taken.
struct Pausing {
    pause: Duration,
    taken_over: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    wrote: AtomicUsize,
}

#[async_trait]
impl ChecksKit for Pausing {
    async fn run_checks(
        &self,
        caller: &Principal,
        _subject: &Subject,
        subject_digest: &Digest,
    ) -> Result<ChecksRun, JobFailure> {
        // The whole task waits (its renewals too), while the runtime's other work goes on
        // on another thread; bounded, so a broken test fails instead of hanging.
        let signal = tokio::task::block_in_place(|| {
            self.taken_over
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(60))
        });
        assert!(signal.is_ok(), "the test never took the job over");
        // Awake again: the next renewal finds the job taken, before this writes anything.
        tokio::time::sleep(self.pause).await;
        self.wrote.fetch_add(1, Ordering::SeqCst);
        Ok(one_passing_check(caller, subject_digest))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_renewal_is_refused_drops_the_job_and_writes_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = requested(&w).await;
        w.engine
            .enqueue_request_jobs(&w.coder, &req, None)
            .await
            .unwrap();
        let lease = Duration::from_millis(300);
        let (release, taken_over) = std::sync::mpsc::channel();
        let kit = Arc::new(Pausing {
            pause: lease * 3,
            taken_over: std::sync::Mutex::new(taken_over),
            wrote: AtomicUsize::new(0),
        });
        let o = WorkOptions {
            holder: "paused".into(),
            lease,
            verifier: None,
            checks: Some(kit.clone()),
            back_off: DEFAULT_BACK_OFF,
        };
        let worker = {
            let (engine, ci) = (w.engine.clone(), w.ci.clone());
            tokio::spawn(async move { engine.work_one(&ci, WorkerRole::Runner, &o).await })
        };
        // While the worker is paused its lease lapses, and another claim takes the job.
        let runner = Actor::new(w.ci.name().as_str(), verdict_core::contracts::Role::Runner);
        let queue = w.engine.store().queue();
        let checks = JobFilter {
            kind: Some(JobKind::Checks),
            ..JobFilter::default()
        };
        while queue.jobs(&checks).await.unwrap()[0].fencing == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut tries = 0;
        let taken = loop {
            advance(&w, Duration::from_secs(1)).await;
            if let Some(j) = queue
                .claim_job(&runner, JobKind::Checks, "other", Duration::from_secs(60))
                .await
                .unwrap()
            {
                break j;
            }
            tries += 1;
            assert!(tries < 1200, "the paused worker's lease never lapsed");
        };
        release.send(()).unwrap();
        assert_eq!(taken.fencing, 2);
        let worked = worker.await.unwrap().unwrap();
        assert!(
            matches!(&worked, Worked::Lost { job } if job.id == taken.id && job.fencing == 1),
            "{worked:?}"
        );
        assert_eq!(kit.wrote.load(Ordering::SeqCst), 0, "it wrote nothing");
        no_evidence_and_the_checks_job_with_the_other_claim(&w).await;
    })
    .await;
}

/// No evidence of the execution is stored, and its one checks job runs under the second claim,
/// held by `other`.
async fn no_evidence_and_the_checks_job_with_the_other_claim(w: &World) {
    let evidence = w
        .engine
        .store()
        .list(DocKind::Evidence, &About::Execution(EXEC.to_owned()))
        .await
        .unwrap();
    assert!(evidence.is_empty(), "{evidence:?}");
    let checks = JobFilter {
        kind: Some(JobKind::Checks),
        ..JobFilter::default()
    };
    let [now] = <[_; 1]>::try_from(w.engine.store().queue().jobs(&checks).await.unwrap()).unwrap();
    assert_eq!(
        (now.state, now.fencing, now.holder.as_deref()),
        (JobState::Running, 2, Some("other"))
    );
}

/// Whether `err` is the store's refusal of claim `fencing` as stale.
fn stale(err: &EngineError, fencing: i64) -> bool {
    matches!(err, EngineError::Store(StoreError::StaleClaim { fencing: f, .. }) if *f == fencing)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_lost_its_job_can_neither_admit_nor_note_a_context_nor_record_a_refused_result()
 {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w).await;
        let o = checked(&w, &req, &srv.url).await;
        // rev claims the verify job with a millisecond's lease and, while its claim is
        // still the job's current one, admits its run.
        let stalled = rev_actor(&w);
        let queue = w.engine.store().queue();
        let lease = Duration::from_millis(1);
        let old = queue
            .claim_job(&stalled, JobKind::Verify, "stalled", lease)
            .await
            .unwrap()
            .unwrap();
        let claim = JobClaim::new(old.id, old.fencing, lease);
        let old_run = format!("job-{}-1", old.id);
        let pre = w
            .engine
            .admit_claimed(&w.rev, &req, "rev", "reviewer", &old_run, Some(&claim))
            .await
            .unwrap();
        assert!(!pre.skipped, "{pre:?}");
        // The store's time passes its lease and rev2 takes the job over (claim 2), with a
        // millisecond's lease too.
        advance(&w, Duration::from_secs(1)).await;
        let rev2 = Actor::new(
            w.rev2.name().as_str(),
            verdict_core::contracts::Role::Verifier,
        );
        let taken = queue
            .claim_job(&rev2, JobKind::Verify, "other", lease)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((taken.id, taken.fencing), (old.id, 2));

        // rev, under its lost claim, tries each write: each is refused as stale and nothing at
        // all is written (no run, no note, no run event, no denial).
        let before = audit_len(&w).await;
        let err = w
            .engine
            .admit_claimed(&w.rev, &req, "rev", "reviewer", "lost-run", Some(&claim))
            .await
            .unwrap_err();
        assert!(stale(&err, 1), "admission: {err}");
        assert!(w.engine.store().run("lost-run").await.unwrap().is_none());
        let report = verdict_engine::RunReport {
            manifest: json!({"entries": []}),
            ..Default::default()
        };
        let err = w
            .engine
            .record_run_context_claimed(&w.rev, &old_run, &report, Some(&claim))
            .await
            .unwrap_err();
        assert!(stale(&err, 1), "context: {err}");
        let run = w.engine.store().run(&old_run).await.unwrap().unwrap();
        let subject = run.admission.subject_digest.clone();
        // A result of the wrong generation: refused at validation, which would end the run
        // and record why, but not for a worker that lost its job.
        let ev = w
            .engine
            .store()
            .list(DocKind::Evidence, &About::Subject(subject.clone()))
            .await
            .unwrap()[0]
            .value()
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let bad = crate::common::result("rev", &old_run, &subject, 7, &ev);
        let err = w
            .engine
            .submit_result_claimed(&w.rev, &bad, Some(&claim))
            .await
            .unwrap_err();
        assert!(stale(&err, 1), "refused result: {err}");
        assert_eq!(audit_len(&w).await, before, "a stale claim writes nothing");
        let run = w.engine.store().run(&old_run).await.unwrap().unwrap();
        assert!(run.events.is_empty(), "{:?}", run.events);
        assert!(
            w.engine
                .run_contexts(&w.ops, &old_run)
                .await
                .unwrap()
                .is_empty()
        );

        // Outside its claim, a verifier records nothing about a job's run either.
        let err = w
            .engine
            .record_run_context(&w.rev, &old_run, &report)
            .await
            .unwrap_err();
        assert!(
            matches!(err, EngineError::Store(StoreError::Refused(_))),
            "{err}"
        );

        // The next claim (rev2's second, claim 3) ends rev's run: the takeover record and the
        // run's end are written by rev2, the claimant, not by the engine.
        advance(&w, Duration::from_secs(1)).await;
        let from = audit_len(&w).await;
        let worked = w
            .engine
            .work_one(&w.rev2, WorkerRole::Verifier, &o)
            .await
            .unwrap();
        let job = done(&worked);
        assert_eq!((job.id, job.fencing), (old.id, 3));
        let events = w.engine.store().audit_events(from, 1000).await.unwrap();
        let takeover_end = events
            .iter()
            .find(|e| e.table == "run_events" && e.key.starts_with(&format!("{old_run}#")))
            .unwrap();
        assert_eq!(
            (takeover_end.principal.as_str(), takeover_end.role.as_str()),
            ("rev2", "verifier")
        );
        assert!(
            events
                .iter()
                .all(|e| e.principal != verdict_engine::ENGINE_PRINCIPAL),
            "{events:#?}"
        );
        let history = w.engine.history(&w.ops, EXEC).await.unwrap();
        let ended = history
            .runs
            .iter()
            .find(|r| r.run_id.as_str() == old_run)
            .unwrap();
        assert_eq!(ended.status.as_str(), "cancelled");
        let why = ended.detail.clone().unwrap();
        assert!(why.contains("taken over by rev2"), "{why}");
    })
    .await;
}

/// Another verifier with a grant on the execution admits itself under the names of the attempts
/// a worker will make at the request's verify job (`job-<job>-<fencing>`: the job's id and its
/// claim's token, both guessable). Each is refused as a denial, writing only that; then the
/// worker's own attempt is admitted and completes, and the Gate passes on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_takes_the_name_of_a_workers_attempt_at_a_job_first() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w).await;
        let jobs = w
            .engine
            .enqueue_request_jobs(&w.coder, &req, None)
            .await
            .unwrap();
        let verify_job = jobs[1].id;
        let before = audit_len(&w).await;
        for fencing in 1..=3 {
            let name = format!("job-{verify_job}-{fencing}");
            for (who, caller) in [("rev2", &w.rev2), ("rev", &w.rev), ("rev2", &w.ops)] {
                let e = w
                    .engine
                    .admit(caller, &req, who, "reviewer", &name)
                    .await
                    .unwrap_err();
                assert_eq!(e.code(), "permission_denied", "{name} as {who}: {e}");
                assert!(
                    e.to_string().contains("only the worker holding that claim"),
                    "{e}"
                );
            }
        }
        assert_eq!(
            audit_len(&w).await,
            before + 9,
            "nine denials, nothing else"
        );
        assert!(
            w.engine
                .store()
                .run(&format!("job-{verify_job}-1"))
                .await
                .unwrap()
                .is_none()
        );

        let (o, _, _) = options(&srv.url);
        let checks = w
            .engine
            .work_one(&w.ci, WorkerRole::Runner, &o)
            .await
            .unwrap();
        done(&checks);
        let verified = w
            .engine
            .work_one(&w.rev, WorkerRole::Verifier, &o)
            .await
            .unwrap();
        let job = done(&verified);
        assert_eq!(
            job.outcome.as_deref(),
            Some(format!("job-{verify_job}-1 completed").as_str())
        );
        gated_pass(&w, &o).await;
    })
    .await;
}

/// A gate job decides the execution's current subject. When its request was about an earlier
/// subject, its outcome says so and names the subject decided, rather than reading as its own
/// request's outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_job_of_a_superseded_request_says_which_subject_it_decided() {
    on_both(|store| async move {
        let srv = fake(Reply::Pass).await;
        let w = world(store).await;
        let req = requested(&w).await;
        w.engine
            .store()
            .queue()
            .enqueue_jobs(
                &w.ops.actor(),
                &[verdict_store::NewJob {
                    kind: JobKind::Gate,
                    request: req.clone(),
                    class: String::new(),
                    deadline: None,
                }],
            )
            .await
            .unwrap();
        let mut next = crate::common::subject(2, "a later change");
        next["objective"]["digest"] = json!(verdict_core::digest::raw(OBJECTIVE.as_bytes()));
        let later = w.engine.put_subject(&w.coder, &next).await.unwrap();
        let (o, _, _) = options(&srv.url);
        let gated = w
            .engine
            .work_one(&w.ops, WorkerRole::Gate, &o)
            .await
            .unwrap();
        let outcome = done(&gated).outcome.clone().unwrap();
        assert!(outcome.starts_with("superseded: "), "{outcome}");
        assert!(outcome.contains(later.as_str()), "{outcome}");
    })
    .await;
}

/// Takes its own job over while it runs (the store's clock past the lease, the job claimed by
/// another holder), then hands over passing evidence for the engine to file.
struct TakenOverMidRun {
    engine: verdict_engine::Engine,
    runner: Actor,
}

#[async_trait]
impl ChecksKit for TakenOverMidRun {
    async fn run_checks(
        &self,
        caller: &Principal,
        _subject: &Subject,
        subject_digest: &Digest,
    ) -> Result<ChecksRun, JobFailure> {
        advance_engine(&self.engine, Duration::from_secs(120)).await;
        let taken = self
            .engine
            .store()
            .queue()
            .claim_job(
                &self.runner,
                JobKind::Checks,
                "other",
                Duration::from_secs(60),
            )
            .await
            .unwrap()
            .expect("the lapsed job was not claimable");
        assert_eq!(taken.fencing, 2);
        Ok(one_passing_check(caller, subject_digest))
    }
}

/// A runner worker's evidence is filed under its job's claim, in the transaction that ends the
/// job: a runner whose claim was taken over while its checks ran (its lease not yet due for
/// renewal in its own time) files nothing, and the job stays with the claim that took it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_whose_checks_job_was_taken_over_files_no_evidence() {
    on_both(|store| async move {
        let w = world(store).await;
        let req = requested(&w).await;
        w.engine
            .enqueue_request_jobs(&w.coder, &req, None)
            .await
            .unwrap();
        let kit = Arc::new(TakenOverMidRun {
            engine: w.engine.clone(),
            runner: Actor::new(w.ci.name().as_str(), verdict_core::contracts::Role::Runner),
        });
        let o = WorkOptions {
            holder: "first".into(),
            lease: Duration::from_secs(60),
            verifier: None,
            checks: Some(kit),
            back_off: DEFAULT_BACK_OFF,
        };
        let worked = w
            .engine
            .work_one(&w.ci, WorkerRole::Runner, &o)
            .await
            .unwrap();
        assert!(
            matches!(&worked, Worked::Lost { job } if job.fencing == 1),
            "{worked:?}"
        );
        no_evidence_and_the_checks_job_with_the_other_claim(&w).await;
    })
    .await;
}
