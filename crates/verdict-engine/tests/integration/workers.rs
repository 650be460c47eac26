//! Workers: a request taken to a decision through `Engine::work_one` calls alone (a runner
//! filing check evidence, a verifier against a fake OpenAI-compatible server on loopback, the
//! gate), each job done once; a worker of the wrong role refused as a denial; and a stalled
//! worker's job taken over, its late completion refused and its run never admitted. On both
//! backends.

use crate::common::{EXEC, World, evidence, on_both, world};
use crate::verify::{DIFF, OBJECTIVE, Reply, fake, inputs, verifiers};
use async_trait::async_trait;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use verdict_core::contracts::Subject;
use verdict_core::digest::Digest;
use verdict_engine::{
    ChecksKit, ClassSource, Engine, Principal, VerifierKit, VerifyInputs, WorkOptions, Worked,
    WorkerRole,
};
use verdict_judge::config::{ResolvedClass, VerifiersFile};
use verdict_store::{Actor, JobFilter, JobKind, JobState, StoreError};

struct Classes(VerifiersFile);

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

/// Files passing evidence for the subject's one check, as the calling runner.
struct Runner {
    runs: AtomicUsize,
}

#[async_trait]
impl ChecksKit for Runner {
    async fn run_checks(
        &self,
        engine: &Engine,
        caller: &Principal,
        _subject: &Subject,
        subject_digest: &Digest,
    ) -> Result<String, String> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let ev = evidence(subject_digest, "pass", caller.name().as_str(), "runner");
        engine
            .add_evidence(caller, &[ev])
            .await
            .map_err(|e| e.to_string())?;
        Ok("1 check".into())
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
    };
    (o, verifier, runner)
}

/// The producer's subject (pinning the objective and the diff) and request; no evidence yet.
async fn requested(w: &World) -> Digest {
    let mut subject = crate::common::subject(1, DIFF);
    subject["objective"]["digest"] = json!(verdict_core::digest::raw(OBJECTIVE.as_bytes()));
    w.engine.put_subject(&w.coder, &subject).await.unwrap();
    w.engine
        .create_request(&w.coder, EXEC, &json!({}))
        .await
        .unwrap()
}

fn done(w: &Worked) -> &verdict_store::Job {
    match w {
        Worked::Done(job) => job,
        other => panic!("not done: {other:?}"),
    }
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
        w.engine
            .enqueue_request_jobs(&w.coder, &req, None)
            .await
            .unwrap();
        let (o, _, _) = options(&srv.url);
        done(
            &w.engine
                .work_one(&w.ci, WorkerRole::Runner, &o)
                .await
                .unwrap(),
        );
        // A worker claims the verify job with a lease that lapses at once, then stalls (a
        // paused process, say): it never renews and never gets to its work.
        let stalled = Actor::new(
            w.rev.name().as_str(),
            verdict_core::contracts::Role::Verifier,
        );
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
        tokio::time::sleep(Duration::from_millis(30)).await;
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
        let gated = w
            .engine
            .work_one(&w.ops, WorkerRole::Gate, &o)
            .await
            .unwrap();
        assert!(
            done(&gated)
                .outcome
                .as_deref()
                .unwrap()
                .starts_with("pass ")
        );
    })
    .await;
}
