//! Wake-ups of waiting workers (`JobQueue::wait_for_jobs`): a worker waiting on its own store
//! handle is woken by a job made claimable on another handle (enqueued, or made ready by
//! another job finishing), is not woken by a job that cannot be claimed yet, and so claims
//! once per wake-up rather than once per poll. On PostgreSQL a listener whose connection was
//! terminated listens again and still wakes its worker for later jobs. Both backends where it
//! applies. Every wait here has a bound far above how long anything takes; a wait that reaches
//! it is the failure looked for, never a figure.

use crate::common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use verdict_core::contracts::Role;
use verdict_store::{Actor, JobKind, LISTENER_APPLICATION, NewJob, Store, Wakeup};

const LEASE: Duration = Duration::from_secs(60);
/// The bound of a wait that must be woken.
const LONG: Duration = Duration::from_secs(60);
/// The bound of a wait that must not be woken.
const SHORT: Duration = Duration::from_millis(300);

fn request(seed: &str) -> verdict_core::digest::Digest {
    job_request(seed)
}

fn job(kind: JobKind, seed: &str, class: &str) -> NewJob {
    NewJob {
        kind,
        request: request(seed),
        class: class.into(),
        deadline: None,
    }
}

/// The requests these tests queue jobs for, stored, and a grant covering them for the worker
/// of each kind (a claim takes only a job its claimant's grants cover).
async fn covered(t: &TestStore) {
    cover_requests(
        t.store.as_ref(),
        &["idle", "r", "later"],
        &[(VERIFIER, Role::Verifier), (RUNNER, Role::Runner)],
    )
    .await;
}

fn operator() -> Actor {
    Actor::new(OPERATOR, Role::Operator)
}

fn verifier() -> Actor {
    Actor::new(VERIFIER, Role::Verifier)
}

fn runner() -> Actor {
    Actor::new(RUNNER, Role::Runner)
}

/// Takes every wake-up a fresh handle owes before anything happened: on PostgreSQL its first
/// wait starts the listener, which says [`Wakeup::Resumed`] once it listens (what was notified
/// before was not heard); on SQLite there is none.
async fn settle(t: &TestStore, store: &Arc<dyn Store>) {
    if t.kind == Kind::Postgres {
        assert_eq!(
            store
                .queue()
                .wait_for_jobs(JobKind::Checks, LONG)
                .await
                .unwrap(),
            Wakeup::Resumed
        );
    }
    for kind in JobKind::ALL {
        let mut woken = 0;
        while store.queue().wait_for_jobs(kind, SHORT).await.unwrap() != Wakeup::TimedOut {
            woken += 1;
            assert!(
                woken <= 2,
                "{kind}: woken {woken} times with nothing changed"
            );
        }
    }
}

fn wait(store: &Arc<dyn Store>, kind: JobKind) -> tokio::task::JoinHandle<Wakeup> {
    let store = store.clone();
    tokio::spawn(async move { store.queue().wait_for_jobs(kind, LONG).await.unwrap() })
}

/// A verify job whose checks job is unfinished wakes no verifier.
async fn unfinished_checks_wake_no_verifier(worker: &Arc<dyn Store>) {
    assert_eq!(
        worker
            .queue()
            .wait_for_jobs(JobKind::Verify, SHORT)
            .await
            .unwrap(),
        Wakeup::TimedOut,
        "a verify job whose checks job is unfinished woke a verifier"
    );
}

async fn an_idle_worker_claims_once_per_wake_up_not_once_per_poll(t: &TestStore) {
    covered(t).await;
    let worker = t.reopen().await;
    let (looked, first_look) = tokio::sync::oneshot::channel();
    let work = tokio::spawn(async move {
        let q = worker.queue();
        let (mut idle, mut looked) = (0, Some(looked));
        loop {
            if let Some(j) = q
                .claim_job(&verifier(), JobKind::Verify, "w", LEASE)
                .await
                .unwrap()
            {
                return (j, idle);
            }
            idle += 1;
            if let Some(looked) = looked.take() {
                looked.send(()).unwrap();
            }
            let woke = q.wait_for_jobs(JobKind::Verify, LONG).await.unwrap();
            assert_ne!(woke, Wakeup::TimedOut, "the enqueue woke nothing");
        }
    });
    // Enqueued on the other handle only once the worker's first claim found nothing.
    first_look.await.unwrap();
    let enqueued = t
        .store
        .queue()
        .enqueue_jobs(&operator(), &[job(JobKind::Verify, "idle", "security")])
        .await
        .unwrap();
    let (claimed, idle) = work.await.unwrap();
    assert_eq!(claimed.id, enqueued[0].id);
    // The claim before the enqueue, and on PostgreSQL at most one more after the listener
    // started; a worker polling would have made one per poll.
    assert!((1..=2).contains(&idle), "{idle} claims found nothing");
}
both!(an_idle_worker_claims_once_per_wake_up_not_once_per_poll);

async fn a_job_made_claimable_wakes_the_workers_of_its_kind_and_no_others(t: &TestStore) {
    covered(t).await;
    let worker = t.reopen().await;
    settle(t, &worker).await;
    // A checks job and the verify job that waits for it: the runner's wait ends, the
    // verifier's does not (its job cannot be claimed yet).
    let runners = wait(&worker, JobKind::Checks);
    t.store
        .queue()
        .enqueue_jobs(
            &operator(),
            &[
                job(JobKind::Checks, "r", ""),
                job(JobKind::Verify, "r", "security"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(runners.await.unwrap(), Wakeup::Signalled);
    unfinished_checks_wake_no_verifier(&worker).await;
    let checks = t
        .store
        .queue()
        .claim_job(&runner(), JobKind::Checks, "r", LEASE)
        .await
        .unwrap()
        .unwrap();
    // Its completion, on the other handle, makes the verify job claimable and wakes the
    // verifier.
    let verifiers = wait(&worker, JobKind::Verify);
    t.store
        .queue()
        .complete_job(&runner(), checks.id, checks.fencing, "1 check")
        .await
        .unwrap();
    assert_eq!(verifiers.await.unwrap(), Wakeup::Signalled);
    let verify = worker
        .queue()
        .claim_job(&verifier(), JobKind::Verify, "v", LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (verify.kind, verify.class.as_str()),
        (JobKind::Verify, "security")
    );
    // Nothing else is claimable: no gate job was enqueued, and no wake-up is left over.
    assert_eq!(
        worker
            .queue()
            .wait_for_jobs(JobKind::Gate, SHORT)
            .await
            .unwrap(),
        Wakeup::TimedOut
    );
}
both!(a_job_made_claimable_wakes_the_workers_of_its_kind_and_no_others);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_whose_connection_was_terminated_listens_again_and_wakes_for_later_jobs() {
    let t = postgres().await;
    covered(&t).await;
    let worker = t.reopen().await;
    let q = worker.queue();
    // The first wait starts the handle's listener; it says so once it listens.
    assert_eq!(
        q.wait_for_jobs(JobKind::Verify, LONG).await.unwrap(),
        Wakeup::Resumed
    );
    let terminated = t
        .count(&format!(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = '{LISTENER_APPLICATION}') s \
             WHERE s.done"
        ))
        .await;
    assert_eq!(terminated, 1, "the handle has one listening connection");
    // It connects and listens again, and says that notifications may have been missed...
    assert_eq!(
        q.wait_for_jobs(JobKind::Verify, LONG).await.unwrap(),
        Wakeup::Resumed
    );
    // ...and hears the next job made claimable.
    let verifiers = wait(&worker, JobKind::Verify);
    let enqueued = t
        .store
        .queue()
        .enqueue_jobs(&operator(), &[job(JobKind::Verify, "later", "security")])
        .await
        .unwrap();
    assert_eq!(verifiers.await.unwrap(), Wakeup::Signalled);
    let claimed = q
        .claim_job(&verifier(), JobKind::Verify, "v", LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, enqueued[0].id);
    t.cleanup().await;
}

/// A handle starts listening with its first question, so whoever kept its answer about a
/// token did so before it listened: a change of that token made in between is never heard.
/// The handle's credential epoch therefore moves once it listens, the first time too, and the
/// holder kept before is asked for again rather than kept until its keeper's own bound (a
/// revoked token served for up to two seconds by another server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_that_starts_listening_moves_its_credential_epoch() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    register(t.store.as_ref(), "laptop", Role::Runner).await;
    let other = t.reopen().await;
    // What a principal cache does: the epoch first, then the store is asked (this starts the
    // handle's listener), and the answer is kept under that epoch.
    let kept = other.credential_epoch();
    assert!(other.principal("laptop").await.unwrap().is_some());
    // The token is revoked through another handle, perhaps before the listener listens.
    t.store
        .change_token(
            &operator(),
            "laptop",
            None,
            &"2026-12-01T00:00:00Z".parse().unwrap(),
            "lost",
        )
        .await
        .unwrap();
    // Once the handle listens, the answer kept before is no longer given, whether or not the
    // change's notification was heard.
    assert_eq!(
        other
            .queue()
            .wait_for_jobs(JobKind::Checks, LONG)
            .await
            .unwrap(),
        Wakeup::Resumed
    );
    assert_ne!(
        other.credential_epoch(),
        kept,
        "a holder kept before the handle listened is still given"
    );
    t.cleanup().await;
}

/// The writes that make jobs claimable in their own transaction wake the workers of those
/// jobs, as a separate enqueue or completion does: a request stored with its jobs wakes the
/// runners (and no verifier, whose job waits for the checks), and a runner's evidence written
/// under its claim that also ends the checks job wakes the verifiers. On PostgreSQL both are
/// one statement (`verdict.write`, schema 41), whose notification is the wake-up.
async fn writes_that_queue_or_end_jobs_wake_the_workers_they_make_claimable(t: &TestStore) {
    use verdict_store::{DocKind, JobClaim, RequestJob};
    covered(t).await;
    let worker = t.reopen().await;
    settle(t, &worker).await;
    let runners = wait(&worker, JobKind::Checks);
    let (request, jobs) = t
        .store
        .put_request_enqueuing(
            &operator(),
            &request_doc("ex-1", "woken"),
            &[
                RequestJob {
                    kind: JobKind::Checks,
                    class: String::new(),
                    deadline: None,
                },
                RequestJob {
                    kind: JobKind::Verify,
                    class: "reviewer".into(),
                    deadline: None,
                },
            ],
        )
        .await
        .unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(runners.await.unwrap(), Wakeup::Signalled);
    unfinished_checks_wake_no_verifier(&worker).await;
    let checks = worker
        .queue()
        .claim_job(&runner(), JobKind::Checks, "r", LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(checks.request.as_str(), request.key);
    let verifiers = wait(&worker, JobKind::Verify);
    let ending = JobClaim::new(checks.id, checks.fencing, LEASE).completing("1 check");
    let s = subject_digest(&subject("ex-1", 1));
    t.store
        .put_claimed(
            &runner(),
            &ending,
            DocKind::Evidence,
            &evidence(&s, "ev-woken"),
        )
        .await
        .unwrap();
    assert_eq!(verifiers.await.unwrap(), Wakeup::Signalled);
    let verify = worker
        .queue()
        .claim_job(&verifier(), JobKind::Verify, "v", LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(verify.request.as_str(), request.key);
}
both!(writes_that_queue_or_end_jobs_wake_the_workers_they_make_claimable);
