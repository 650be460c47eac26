//! The job queue: claims never share a job, a lapsed lease is taken over and the old claim's
//! late heartbeat, completion or failure is refused, a gate job waits for its request's other
//! jobs (or its deadline), and only a kind's worker role works it. On both backends; on
//! PostgreSQL also by hand, through a login that holds one role only.

use crate::common;

use common::*;
use sqlx::Executor as _;
use std::collections::BTreeSet;
use std::time::Duration;
use verdict_core::contracts::Role;
use verdict_core::digest::Digest;
use verdict_store::{Actor, ActorRole, JobFilter, JobKind, JobState, NewJob, StoreError};

const LEASE: Duration = Duration::from_secs(60);

/// Every seed these tests claim jobs for.
const SEEDS: &[&str] = &[
    "race0", "race1", "race2", "race3", "race4", "race5", "race6", "race7", "race8", "race9",
    "race10", "race11", "lapse", "retry", "retry2", "wait", "late", "long", "roles", "hand",
];

/// The requests these tests queue jobs for, stored, and a write grant on their execution for
/// each worker they use.
async fn covered(t: &TestStore) {
    let workers = [
        ("va", Role::Verifier),
        ("vb", Role::Verifier),
        ("v0", Role::Verifier),
        ("v1", Role::Verifier),
        ("v2", Role::Verifier),
        ("v9", Role::Verifier),
        (RUNNER, Role::Runner),
    ];
    cover_requests(t.store.as_ref(), SEEDS, &workers).await;
}

fn request(seed: &str) -> Digest {
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

fn operator() -> Actor {
    Actor::new(OPERATOR, Role::Operator)
}

fn verifier(name: &str) -> Actor {
    Actor::new(name, Role::Verifier)
}

fn gate_worker() -> Actor {
    Actor {
        principal: OPERATOR.into(),
        role: ActorRole::Gate,
    }
}

async fn enqueuing_twice_adds_nothing_and_only_operators_and_producers_enqueue(t: &TestStore) {
    let q = t.store.queue();
    let jobs = [
        job(JobKind::Verify, "r1", "security"),
        job(JobKind::Verify, "r1", "style"),
        job(JobKind::Gate, "r1", ""),
    ];
    let first = q.enqueue_jobs(&operator(), &jobs).await.unwrap();
    assert_eq!(first.len(), 3);
    assert!(
        first
            .iter()
            .all(|j| j.state == JobState::Ready && j.fencing == 0)
    );
    // Queued again, nothing is added. (A producer queues only its own subject's stored requests
    // on PostgreSQL, schema version 20; these requests are not stored, so the operator asks.)
    let again = q.enqueue_jobs(&operator(), &jobs).await.unwrap();
    assert_eq!(
        again.iter().map(|j| j.id).collect::<Vec<_>>(),
        first.iter().map(|j| j.id).collect::<Vec<_>>()
    );
    assert_eq!(again[0].enqueued_by, OPERATOR, "the first enqueue stands");
    assert!(again[0].created_at == first[0].created_at);
    assert_eq!(q.jobs(&JobFilter::default()).await.unwrap().len(), 3);
    for role in [Role::Runner, Role::Verifier, Role::Human] {
        let err = q
            .enqueue_jobs(
                &Actor::new("someone", role),
                &[job(JobKind::Gate, "r2", "")],
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    }
    assert_eq!(q.jobs(&JobFilter::default()).await.unwrap().len(), 3);
}
both!(enqueuing_twice_adds_nothing_and_only_operators_and_producers_enqueue);

async fn racing_workers_never_claim_the_same_job(t: &TestStore) {
    covered(t).await;
    let q = t.store.queue();
    let jobs: Vec<NewJob> = (0..12)
        .map(|i| job(JobKind::Verify, &format!("race{i}"), "security"))
        .collect();
    q.enqueue_jobs(&operator(), &jobs).await.unwrap();
    // Twenty-four claims at once for twelve jobs: each job goes to exactly one of them.
    let claims = (0..24).map(|i| {
        let store = t.store.clone();
        tokio::spawn(async move {
            store
                .queue()
                .claim_job(
                    &verifier(&format!("v{}", i % 3)),
                    JobKind::Verify,
                    &format!("w{i}"),
                    LEASE,
                )
                .await
                .unwrap()
        })
    });
    let mut won = Vec::new();
    for c in claims {
        if let Some(j) = c.await.unwrap() {
            won.push(j);
        }
    }
    let ids: BTreeSet<i64> = won.iter().map(|j| j.id).collect();
    assert_eq!(won.len(), 12, "every job claimed once");
    assert_eq!(ids.len(), 12, "no job claimed twice");
    assert!(won.iter().all(|j| j.fencing == 1 && j.attempts == 1));
    let none = q
        .claim_job(&verifier("v9"), JobKind::Verify, "late", LEASE)
        .await
        .unwrap();
    assert!(none.is_none(), "nothing left while every lease holds");
}
both!(racing_workers_never_claim_the_same_job);

async fn a_lapsed_lease_is_taken_over_and_the_old_claim_is_refused(t: &TestStore) {
    covered(t).await;
    let q = t.store.queue();
    let [queued] = <[_; 1]>::try_from(
        q.enqueue_jobs(&operator(), &[job(JobKind::Verify, "lapse", "security")])
            .await
            .unwrap(),
    )
    .unwrap();
    let (a, b) = (verifier("va"), verifier("vb"));
    let old = q
        .claim_job(&a, JobKind::Verify, "a", Duration::from_millis(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((old.id, old.fencing), (queued.id, 1));
    tokio::time::sleep(Duration::from_millis(30)).await;
    let new = q
        .claim_job(&b, JobKind::Verify, "b", LEASE)
        .await
        .unwrap()
        .expect("a lapsed lease is taken over");
    assert_eq!((new.id, new.fencing, new.attempts), (old.id, 2, 2));
    // Everything the old claim tries now is refused and changes nothing.
    let stale = [
        q.heartbeat(&a, old.id, old.fencing, LEASE)
            .await
            .unwrap_err(),
        q.complete_job(&a, old.id, old.fencing, "late")
            .await
            .unwrap_err(),
        q.fail_job(&a, old.id, old.fencing, "late", None)
            .await
            .unwrap_err(),
    ];
    for err in stale {
        assert!(
            matches!(err, StoreError::StaleClaim { job, fencing: 1 } if job == old.id),
            "{err}"
        );
    }
    // Nor may another principal finish the new claim with its token.
    let err = q
        .complete_job(&a, new.id, new.fencing, "theirs")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::StaleClaim { .. }), "{err}");
    let [now] = <[_; 1]>::try_from(q.jobs(&JobFilter::default()).await.unwrap()).unwrap();
    assert_eq!(
        (now.state, now.fencing, now.outcome),
        (JobState::Running, 2, None)
    );
    q.heartbeat(&b, new.id, new.fencing, LEASE).await.unwrap();
    let done = q.complete_job(&b, new.id, new.fencing, "ok").await.unwrap();
    assert_eq!(
        (done.state, done.outcome.as_deref()),
        (JobState::Done, Some("ok"))
    );
    assert!(done.done_at.is_some());
    // A finished job is finished: completing it again is refused too.
    let err = q
        .complete_job(&b, new.id, new.fencing, "again")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::StaleClaim { .. }), "{err}");
    assert!(
        q.claim_job(&b, JobKind::Verify, "b", LEASE)
            .await
            .unwrap()
            .is_none()
    );
}
both!(a_lapsed_lease_is_taken_over_and_the_old_claim_is_refused);

async fn a_failed_attempt_is_retried_after_its_back_off_or_given_up(t: &TestStore) {
    covered(t).await;
    let q = t.store.queue();
    q.enqueue_jobs(&operator(), &[job(JobKind::Verify, "retry", "security")])
        .await
        .unwrap();
    let v = verifier("va");
    let first = q
        .claim_job(&v, JobKind::Verify, "a", LEASE)
        .await
        .unwrap()
        .unwrap();
    let failed = q
        .fail_job(
            &v,
            first.id,
            first.fencing,
            "provider down",
            Some(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    assert_eq!(failed.state, JobState::Ready);
    assert_eq!(failed.last_error.as_deref(), Some("provider down"));
    assert!(
        q.claim_job(&v, JobKind::Verify, "a", LEASE)
            .await
            .unwrap()
            .is_none(),
        "not before its back-off"
    );
    q.enqueue_jobs(&operator(), &[job(JobKind::Verify, "retry2", "security")])
        .await
        .unwrap();
    let second = q
        .claim_job(&v, JobKind::Verify, "a", LEASE)
        .await
        .unwrap()
        .unwrap();
    let given_up = q
        .fail_job(&v, second.id, second.fencing, "bad input", None)
        .await
        .unwrap();
    assert_eq!(given_up.state, JobState::Failed);
    assert!(given_up.state.is_finished());
}
both!(a_failed_attempt_is_retried_after_its_back_off_or_given_up);

async fn a_gate_job_waits_for_its_requests_other_jobs_or_its_deadline(t: &TestStore) {
    covered(t).await;
    // Gate jobs are claimed under a stored operator's name (PostgreSQL since schema 13).
    register(t.store.as_ref(), OPERATOR, Role::Operator).await;
    let q = t.store.queue();
    q.enqueue_jobs(
        &operator(),
        &[
            job(JobKind::Verify, "wait", "security"),
            job(JobKind::Gate, "wait", ""),
            job(JobKind::Verify, "late", "security"),
            NewJob {
                deadline: Some(Duration::from_millis(1)),
                ..job(JobKind::Gate, "late", "")
            },
        ],
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    // The request "late" passed its deadline: its gate job is ready although its verify job
    // never ran. The request "wait" has none, so its gate job waits.
    let gate = gate_worker();
    let first = q
        .claim_job(&gate, JobKind::Gate, "g", LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.request, request("late"));
    assert!(
        q.claim_job(&gate, JobKind::Gate, "g", LEASE)
            .await
            .unwrap()
            .is_none()
    );
    let v = verifier("va");
    let wait_verify = q
        .jobs(&JobFilter {
            request: Some(request("wait")),
            kind: Some(JobKind::Verify),
            state: None,
        })
        .await
        .unwrap();
    assert_eq!(wait_verify.len(), 1);
    let mut claimed = Vec::new();
    while let Some(j) = q.claim_job(&v, JobKind::Verify, "v", LEASE).await.unwrap() {
        claimed.push(j);
    }
    let mine = claimed
        .iter()
        .find(|j| j.request == request("wait"))
        .unwrap();
    assert!(
        q.claim_job(&gate, JobKind::Gate, "g", LEASE)
            .await
            .unwrap()
            .is_none()
    );
    q.complete_job(&v, mine.id, mine.fencing, "submitted")
        .await
        .unwrap();
    let second = q
        .claim_job(&gate, JobKind::Gate, "g", LEASE)
        .await
        .unwrap()
        .expect("ready once every other job of its request is finished");
    assert_eq!(second.request, request("wait"));
}
both!(a_gate_job_waits_for_its_requests_other_jobs_or_its_deadline);

async fn a_lease_longer_than_a_day_is_refused_before_anything_is_written(t: &TestStore) {
    covered(t).await;
    let q = t.store.queue();
    q.enqueue_jobs(&operator(), &[job(JobKind::Checks, "long", "")])
        .await
        .unwrap();
    let runner = Actor::new(RUNNER, Role::Runner);
    let too_long = verdict_store::MAX_LEASE + Duration::from_millis(1);
    let err = q
        .claim_job(&runner, JobKind::Checks, "r", too_long)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Invalid { what: "lease", .. }),
        "{err}"
    );
    let ready = q.jobs(&JobFilter::default()).await.unwrap();
    assert_eq!(
        ready[0].state,
        JobState::Ready,
        "the refused claim took the job"
    );
    // A day exactly is taken; a renewal past a day is refused and leaves the lease as it was.
    let held = q
        .claim_job(&runner, JobKind::Checks, "r", verdict_store::MAX_LEASE)
        .await
        .unwrap()
        .unwrap();
    let err = q
        .heartbeat(&runner, held.id, held.fencing, too_long)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Invalid { what: "lease", .. }),
        "{err}"
    );
    let after = q.jobs(&JobFilter::default()).await.unwrap();
    assert_eq!(after[0].lease_until, held.lease_until);
}
both!(a_lease_longer_than_a_day_is_refused_before_anything_is_written);

async fn only_a_kinds_worker_role_works_it(t: &TestStore) {
    covered(t).await;
    let q = t.store.queue();
    q.enqueue_jobs(
        &operator(),
        &[
            job(JobKind::Checks, "roles", ""),
            job(JobKind::Verify, "roles", "security"),
        ],
    )
    .await
    .unwrap();
    let wrong = [
        (Actor::new(RUNNER, Role::Runner), JobKind::Verify),
        (verifier("va"), JobKind::Checks),
        (Actor::new(PRODUCER, Role::Producer), JobKind::Checks),
        (operator(), JobKind::Verify),
        (Actor::new(RUNNER, Role::Runner), JobKind::Gate),
    ];
    for (actor, kind) in wrong {
        let err = q.claim_job(&actor, kind, "x", LEASE).await.unwrap_err();
        assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    }
    let runner = Actor::new(RUNNER, Role::Runner);
    let checks = q
        .claim_job(&runner, JobKind::Checks, "r", LEASE)
        .await
        .unwrap()
        .unwrap();
    // A verifier cannot finish the runner's job even with its token.
    let err = q
        .complete_job(&verifier("va"), checks.id, checks.fencing, "x")
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Forbidden { .. } | StoreError::Denied(_)),
        "{err}"
    );
    q.complete_job(&runner, checks.id, checks.fencing, "ok")
        .await
        .unwrap();
}
both!(only_a_kinds_worker_role_works_it);

async fn sql(conn: &mut sqlx::PgConnection, text: &str) -> Result<(), String> {
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(text.to_owned())))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_hand_a_worker_login_changes_jobs_only_through_the_routines_and_its_own_role() {
    let t = postgres().await;
    covered(&t).await;
    let q = t.store.queue();
    q.enqueue_jobs(&operator(), &[job(JobKind::Verify, "hand", "security")])
        .await
        .unwrap();
    let v = verifier("va");
    let held = q
        .claim_job(&v, JobKind::Verify, "a", Duration::from_millis(1))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    // The principals' own logins (schema 7): each acts only for itself.
    let (mut runner, _) = principal_login(&t, "ci-runner", Role::Runner).await;
    let refused = [
        // Straight writes to the table.
        format!(
            "UPDATE verdict.jobs SET state = 'done' WHERE id = {}",
            held.id
        ),
        format!("DELETE FROM verdict.jobs WHERE id = {}", held.id),
        "INSERT INTO verdict.jobs (kind, request, enqueued_by) VALUES ('gate', 'x', 'x')".into(),
        // A verify claim while acting as a runner, and as a verifier it is not a member of.
        "SELECT * FROM verdict.job_claim('ci-runner', 'runner', 'verify', 'h', 60000)".into(),
        "SELECT * FROM verdict.job_claim('ci-runner', 'verifier', 'verify', 'h', 60000)".into(),
        // Completing the verifier's job with its token, claiming to be it.
        format!(
            "SELECT * FROM verdict.job_complete('va', 'verifier', {}, {}, 'x')",
            held.id, held.fencing
        ),
        // Enqueuing is for operators and producers.
        "SELECT * FROM verdict.job_enqueue('ci-runner', 'runner', ARRAY['checks'], \
         ARRAY['x'], ARRAY[''], ARRAY[NULL::bigint])"
            .into(),
    ];
    for text in &refused {
        let err = sql(&mut runner, text).await.unwrap_err();
        assert!(
            err.contains("permission denied")
                || err.contains("may not")
                || err.contains("not a member")
                || err.contains("does not act for principal"),
            "{text}: {err}"
        );
    }
    // A verifier's login takes the lapsed job over through the routine, but only as itself;
    // the old token is then refused by the routine itself.
    let (mut verifier_login, _) = principal_login(&t, "vb", Role::Verifier).await;
    let err = sql(
        &mut verifier_login,
        "SELECT * FROM verdict.job_claim('va', 'verifier', 'verify', 'h', 60000)",
    )
    .await
    .unwrap_err();
    assert!(err.contains("does not act for principal va"), "{err}");
    // Schema 44: nor under a holder past 256 characters.
    let err = sql(
        &mut verifier_login,
        "SELECT * FROM verdict.job_claim('vb', 'verifier', 'verify', repeat('H', 257), 60000)",
    )
    .await
    .unwrap_err();
    assert!(err.contains("a holder is at most 256 characters"), "{err}");
    sql(
        &mut verifier_login,
        "SELECT * FROM verdict.job_claim('vb', 'verifier', 'verify', 'h', 60000)",
    )
    .await
    .unwrap();
    // Its login cannot finish the job as the worker it took it from...
    let err = sql(
        &mut verifier_login,
        &format!(
            "SELECT * FROM verdict.job_complete('va', 'verifier', {}, {}, 'late')",
            held.id, held.fencing
        ),
    )
    .await
    .unwrap_err();
    assert!(err.contains("does not act for principal va"), "{err}");
    // ...nor with the old token as itself; and the old holder's own late completion is refused.
    let err = sql(
        &mut verifier_login,
        &format!(
            "SELECT * FROM verdict.job_complete('vb', 'verifier', {}, {}, 'late')",
            held.id, held.fencing
        ),
    )
    .await
    .unwrap_err();
    assert!(err.contains("not the current claim"), "{err}");
    let late = q
        .complete_job(&v, held.id, held.fencing, "late")
        .await
        .unwrap_err();
    assert!(matches!(late, StoreError::StaleClaim { .. }), "{late}");
    let [now] = <[_; 1]>::try_from(q.jobs(&JobFilter::default()).await.unwrap()).unwrap();
    assert_eq!(
        (now.state, now.fencing, now.principal.as_deref()),
        (JobState::Running, 2, Some("vb"))
    );
    // An outcome of any length (terminal escapes here) is kept to its first 4,000 characters,
    // the cut marked, and the job still ends.
    sql(
        &mut verifier_login,
        &format!(
            "SELECT * FROM verdict.job_complete('vb', 'verifier', {}, 2, repeat(E'\\x1b[2J PASS ', 10000))",
            held.id
        ),
    )
    .await
    .unwrap();
    let done = q.job(held.id).await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Done);
    let outcome = done.outcome.unwrap();
    let mark = " [cut: 100000 characters]";
    assert!(outcome.ends_with(mark), "{}", &outcome[3990..]);
    assert_eq!(outcome.chars().count(), 4000 + mark.len());
    // A later write of the row (an operator's superuser here, as a routine would) leaves the
    // cut outcome, and its mark, as they are.
    t.raw(&format!(
        "UPDATE verdict.jobs SET attempts = attempts WHERE id = {}",
        held.id
    ))
    .await
    .unwrap();
    assert_eq!(
        q.job(held.id).await.unwrap().unwrap().outcome.unwrap(),
        outcome
    );
    t.cleanup().await;
}

/// A runner or a verifier with no grant on a request's execution tries to claim its job; a
/// runner with only a read grant tries to claim a checks job; a revoked grant is tried too.
async fn a_claim_takes_only_jobs_the_claimants_grants_cover(t: &TestStore) {
    covered(t).await;
    let store = t.store.as_ref();
    let q = store.queue();
    // A request about ex-2, which the workers of `covered` hold no grant on.
    store
        .put(
            &Actor::new(PRODUCER, Role::Producer),
            verdict_store::DocKind::Subject,
            &subject("ex-2", 1),
        )
        .await
        .unwrap();
    store
        .put(
            &operator(),
            verdict_store::DocKind::Request,
            &request_doc("ex-2", "other"),
        )
        .await
        .unwrap();
    let theirs = request_of("ex-2", "other");
    // Queued first, so a claim that did not skip it would take it.
    q.enqueue_jobs(
        &operator(),
        &[
            NewJob {
                kind: JobKind::Checks,
                request: theirs.clone(),
                class: String::new(),
                deadline: None,
            },
            job(JobKind::Checks, "roles", ""),
        ],
    )
    .await
    .unwrap();
    let runner = Actor::new(RUNNER, Role::Runner);
    let mine = q
        .claim_job(&runner, JobKind::Checks, "r", LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        mine.request,
        request("roles"),
        "the uncovered job is skipped"
    );
    assert!(
        q.claim_job(&runner, JobKind::Checks, "r", LEASE)
            .await
            .unwrap()
            .is_none()
    );
    // A read grant on ex-2 does not let a runner write its checks; nor does a revoked write
    // grant; a write grant in force does.
    let op = operator();
    let grant = |id: &str, access: verdict_store::Access| verdict_store::GrantRecord {
        grant_id: id.parse().unwrap(),
        principal: RUNNER.parse().unwrap(),
        scope: verdict_store::GrantScope {
            kind: verdict_store::ScopeKind::Execution,
            id: "ex-2".parse().unwrap(),
        },
        access,
        expires_at: "2099-12-31T00:00:00Z".parse().unwrap(),
    };
    store
        .add_grant(&op, &grant("g-r-read", verdict_store::Access::Read))
        .await
        .unwrap();
    store
        .add_grant(&op, &grant("g-r-write", verdict_store::Access::Write))
        .await
        .unwrap();
    revoke(store, "g-r-write").await;
    assert!(
        q.claim_job(&runner, JobKind::Checks, "r", LEASE)
            .await
            .unwrap()
            .is_none()
    );
    let [queued] = <[_; 1]>::try_from(
        q.jobs(&JobFilter {
            request: Some(theirs.clone()),
            ..JobFilter::default()
        })
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!((queued.state, queued.fencing), (JobState::Ready, 0));
    grant_write(store, "g-r-write-2", RUNNER, "ex-2").await;
    let taken = q
        .claim_job(&runner, JobKind::Checks, "r", LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.request, theirs);
    // A verify job needs any grant in force of its verifier; a gate job none.
    q.enqueue_jobs(
        &operator(),
        &[NewJob {
            kind: JobKind::Verify,
            request: request_of("ex-2", "other"),
            class: "security".into(),
            deadline: None,
        }],
    )
    .await
    .unwrap();
    q.complete_job(&runner, taken.id, taken.fencing, "done")
        .await
        .unwrap();
    assert!(
        q.claim_job(&verifier("va"), JobKind::Verify, "v", LEASE)
            .await
            .unwrap()
            .is_none()
    );
    store
        .add_grant(
            &op,
            &verdict_store::GrantRecord {
                principal: "va".parse().unwrap(),
                ..grant("g-va-read", verdict_store::Access::Read)
            },
        )
        .await
        .unwrap();
    let verify = q
        .claim_job(&verifier("va"), JobKind::Verify, "v", LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(verify.request, theirs);
}
both!(a_claim_takes_only_jobs_the_claimants_grants_cover);

/// A claim checks the claimant's grant for the job it takes, not for every job waiting (schema
/// 40), so its cost does not grow with the backlog. Counted in the claiming transaction itself:
/// a superuser's connection with function calls tracked calls the routine as the verifier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_checks_the_grant_of_the_job_it_takes_only() {
    let t = postgres().await;
    covered(&t).await;
    let seeds = &SEEDS[..12];
    let q = t.store.queue();
    let jobs: Vec<NewJob> = seeds
        .iter()
        .map(|seed| job(JobKind::Verify, seed, "security"))
        .collect();
    q.enqueue_jobs(&operator(), &jobs).await.unwrap();
    let verdict_store::Location::Postgres(url) = &t.location else {
        unreachable!()
    };
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(url)
        .await
        .unwrap();
    sql(&mut conn, "SET track_functions = 'all'; BEGIN")
        .await
        .unwrap();
    let claimed: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM verdict.job_claim('va', 'verifier', 'verify', 'by-hand', 60000)",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let checks: i64 = sqlx::query_scalar(
        "SELECT coalesce(pg_stat_get_xact_function_calls(\
           'verdict._job_covered(text, text, text, timestamptz)'::regprocedure), 0)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    sql(&mut conn, "COMMIT").await.unwrap();
    // The first job queued, as before.
    let first = q
        .jobs(&JobFilter::default())
        .await
        .unwrap()
        .into_iter()
        .find(|j| j.request == request(seeds[0]))
        .unwrap();
    assert_eq!(claimed, vec![first.id]);
    assert_eq!(
        checks,
        1,
        "a claim with {} jobs waiting checked {checks} grants",
        seeds.len()
    );
    t.cleanup().await;
}

/// What PostgreSQL's `job_enqueue` holds since schema 20 the store holds on both backends
/// (SQLite's store code since schema 41): a producer queues only jobs of a stored engine
/// request whose subject it produced, a verify job only for a class the request asks for; a
/// verify job has a class and another kind none, whoever queues it. A refused call queues none
/// of its jobs, a good one beside a bad one included.
async fn a_producer_queues_only_the_jobs_of_its_own_requests(t: &TestStore) {
    use verdict_store::DocKind;
    let store = t.store.as_ref();
    populate(store).await;
    let op = operator();
    let s = subject_digest(&subject("ex-1", 1));
    let p = store
        .put(&op, DocKind::Policy, &policy(4))
        .await
        .unwrap()
        .digest;
    let engine_request = serde_json::json!({
        "schema": "verdict.request/v1", "execution": "ex-1", "subject_digest": s.as_str(),
        "generation": 1, "gate": "merge", "policy_digest": p.as_str(),
        "verifier_classes": ["reviewer"], "prior_blockers": [], "risk_class": "low",
        "budget": {}
    });
    let own = store
        .put(&op, DocKind::Request, &engine_request)
        .await
        .unwrap()
        .digest;
    // A record of the requests table that is no engine request.
    let note = store
        .put(&op, DocKind::Request, &request_doc("ex-1", "not-a-request"))
        .await
        .unwrap()
        .digest;
    register(store, "coder-2", Role::Producer).await;
    let producer = Actor::new(PRODUCER, Role::Producer);
    let other = Actor::new("coder-2", Role::Producer);
    let on = |kind, request: &Digest, class: &str| NewJob {
        kind,
        request: request.clone(),
        class: class.into(),
        deadline: None,
    };
    let q = store.queue();
    let count = || async { q.jobs(&JobFilter::default()).await.unwrap().len() };
    let before = count().await;
    for (who, jobs) in [
        (&other, vec![on(JobKind::Gate, &own, "")]),
        (
            &producer,
            vec![on(JobKind::Gate, &request("never-stored"), "")],
        ),
        (&producer, vec![on(JobKind::Gate, &note, "")]),
        (&producer, vec![on(JobKind::Verify, &own, "security")]),
        (&producer, vec![on(JobKind::Verify, &own, "")]),
        (&producer, vec![on(JobKind::Checks, &own, "x")]),
        (&op, vec![on(JobKind::Checks, &own, "x")]),
        (&op, vec![on(JobKind::Verify, &own, "")]),
        (
            &producer,
            vec![
                on(JobKind::Checks, &own, ""),
                on(JobKind::Verify, &own, "security"),
            ],
        ),
    ] {
        let err = q.enqueue_jobs(who, &jobs).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Denied(m) if m.contains("may queue only jobs")),
            "{} {jobs:?}: {err}",
            who.principal
        );
    }
    assert_eq!(count().await, before, "a refused enqueue queued something");
    let queued = q
        .enqueue_jobs(
            &producer,
            &[
                on(JobKind::Checks, &own, ""),
                on(JobKind::Verify, &own, "reviewer"),
                on(JobKind::Gate, &own, ""),
            ],
        )
        .await
        .unwrap();
    assert_eq!(queued.len(), 3);
    assert_eq!(count().await, before + 3);
}
both!(a_producer_queues_only_the_jobs_of_its_own_requests);
