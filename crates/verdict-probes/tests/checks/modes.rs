//! The modes against scripted loopback servers and real files: converge, hold, unchanged,
//! `--during`, stopping and the jobs bound.

use crate::common::{
    Http, closed_port, one_connection_http, result, run, run_during, run_with, slow, spec, step,
};
use std::sync::Arc;
use std::time::Duration;
use verdict_core::contracts::CheckOutcome::{Error, Fail, Pass};
use verdict_probes::runner::{self, Quiet, RunOptions, StopReason, Stopper};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converge_succeeds_late() {
    let h = Http::start().await;
    h.script(
        "late",
        vec![
            step(503, "starting"),
            step(503, "starting"),
            step(200, "ok"),
        ],
    );
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: web\n    timeout: 10s\n    interval: 50ms\n    probe: {{kind: http, url: '{}', status: 200}}\n",
        h.url("/s/late")
    ));
    let r = run(&s).await;
    let w = result(&r, "web");
    assert_eq!(w.outcome, Pass, "{}", w.reason);
    assert_eq!(w.samples, 3);
    assert!(w.reason.contains("passed at observation 3"), "{}", w.reason);
    assert_eq!(h.hits("late"), 3, "no observation after the pass");
}

/// `assert` is exactly one observation: a transient 503 that a converge would wait out fails
/// an assert, with no second observation, whether the mode is written or is the default of a
/// safety or catastrophic criterion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assert_observes_once_and_a_transient_failure_fails_it() {
    let h = Http::start().await;
    for (name, how) in [
        ("written", "    mode: assert\n"),
        ("safety", "    role: safety\n"),
        ("catastrophic", "    role: catastrophic\n"),
    ] {
        h.script(name, vec![step(503, "starting"), step(200, "ok")]);
        let s = spec(&format!(
            "version: 1\ncriteria:\n  - id: web\n{how}    probe: {{kind: http, url: '{}', status: 200}}\n",
            h.url(&format!("/s/{name}"))
        ));
        let r = run(&s).await;
        let w = result(&r, "web");
        assert_eq!(w.outcome, Fail, "{name}: {}", w.reason);
        assert_eq!(w.samples, 1, "{name}");
        assert_eq!(h.hits(name), 1, "{name}: observed again after the failure");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_503_and_timeouts_do_not_end_a_converge() {
    let h = Http::start().await;
    h.script(
        "flaky",
        vec![
            step(503, "busy"),
            slow(200, "late", 2000),
            step(429, "slow down"),
            step(200, "ok"),
        ],
    );
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: web\n    timeout: 10s\n    interval: 50ms\n    max_interval: 100ms\n    probe: {{kind: http, url: '{}', status: 200, timeout: 300ms}}\n",
        h.url("/s/flaky")
    ));
    let r = run(&s).await;
    let w = result(&r, "web");
    assert_eq!(w.outcome, Pass, "{}", w.reason);
    assert_eq!(w.samples, 4);
    let outcomes: Vec<_> = w.observations.iter().map(|o| o.outcome).collect();
    assert_eq!(outcomes, [Fail, Error, Fail, Pass]);
    assert!(
        w.observations[1].reason.contains("timed out after 300ms"),
        "{}",
        w.observations[1].reason
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converge_that_times_out_shows_the_last_error() {
    let h = Http::start().await;
    h.script("bad", vec![slow(200, "late", 2000), step(500, "broken")]);
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: web\n    timeout: 1s\n    interval: 100ms\n    probe: {{kind: http, url: '{}', status: 200, timeout: 200ms}}\n",
        h.url("/s/bad")
    ));
    let r = run(&s).await;
    let w = result(&r, "web");
    assert_eq!(w.outcome, Fail, "{}", w.reason);
    assert!(w.reason.contains("did not pass within 1s"), "{}", w.reason);
    assert!(w.reason.contains("last: status 500"), "{}", w.reason);
    assert!(
        w.reason
            .contains("last error (observation 1): timed out after 200ms"),
        "{}",
        w.reason
    );
    assert!(
        w.samples >= 3,
        "kept polling after the error: {}",
        w.samples
    );

    // Only errors: the criterion is an error, with the last one shown.
    let port = closed_port().await;
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: down\n    timeout: 300ms\n    interval: 50ms\n    probe: {{kind: tcp, address: '127.0.0.1:{port}', expect: open}}\n  - id: refused\n    timeout: 300ms\n    interval: 50ms\n    probe: {{kind: http, url: 'http://127.0.0.1:{port}/'}}\n"
    ));
    let r = run(&s).await;
    assert_eq!(result(&r, "down").outcome, Fail);
    let e = result(&r, "refused");
    assert_eq!(e.outcome, Error, "{}", e.reason);
    assert!(
        e.reason.contains("did not pass within 300ms"),
        "{}",
        e.reason
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converge_with_timeout_zero_observes_once() {
    let h = Http::start().await;
    h.script("down", vec![step(503, "no")]);
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: web\n    timeout: 0\n    probe: {{kind: http, url: '{}'}}\n",
        h.url("/s/down")
    ));
    let r = run(&s).await;
    assert_eq!(result(&r, "web").outcome, Fail);
    assert_eq!(result(&r, "web").samples, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_fails_on_one_bad_sample_in_the_middle() {
    let h = Http::start().await;
    h.script(
        "svc",
        vec![
            step(200, "ok"),
            step(200, "ok"),
            step(500, "oops"),
            step(200, "ok"),
        ],
    );
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: no-5xx\n    role: safety\n    mode: hold\n    window: 1s\n    interval: 50ms\n    probe: {{kind: http, url: '{}', status: 200}}\n",
        h.url("/s/svc")
    ));
    let r = run(&s).await;
    let c = result(&r, "no-5xx");
    assert_eq!(c.outcome, Fail, "{}", c.reason);
    assert!(
        c.reason.contains("violated at sample 3 of 21"),
        "{}",
        c.reason
    );
    assert_eq!(c.samples, 3, "a violation ends the hold");
    assert!(!r.passed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_passes_when_every_sample_passes_and_window_zero_is_one_sample() {
    let h = Http::start().await;
    h.script("svc", vec![step(200, "ok")]);
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: steady\n    role: safety\n    mode: hold\n    window: 300ms\n    interval: 100ms\n    probe: {{kind: http, url: '{u}'}}\n  - id: once\n    role: safety\n    mode: hold\n    window: 0\n    probe: {{kind: http, url: '{u}'}}\n",
        u = h.url("/s/svc")
    ));
    let r = run(&s).await;
    let steady = result(&r, "steady");
    assert_eq!(steady.outcome, Pass, "{}", steady.reason);
    assert_eq!(steady.samples, 4);
    let once = result(&r, "once");
    assert_eq!(once.outcome, Pass, "{}", once.reason);
    assert_eq!(once.samples, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_with_a_sample_that_could_not_observe_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let n = dir.path().join("n");
    std::fs::write(&n, "0").unwrap();
    // The third sample hangs past the probe timeout.
    let script = format!(
        "n=$(cat '{p}'); echo $((n+1)) > '{p}'; if [ \"$n\" = 2 ]; then sleep 5; fi",
        p = n.display()
    );
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: h\n    role: safety\n    mode: hold\n    window: 400ms\n    interval: 100ms\n    probe: {{kind: command, argv: [sh, -c, {}], timeout: 200ms}}\n",
        serde_json::to_string(&script).unwrap()
    ));
    let r = run(&s).await;
    let h = result(&r, "h");
    assert_eq!(h.outcome, Error, "{}", h.reason);
    assert!(h.reason.contains("could not observe"), "{}", h.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_cut_short_by_the_deadline_is_an_error_never_a_pass() {
    let h = Http::start().await;
    h.script("svc", vec![step(200, "ok")]);
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: long\n    role: safety\n    mode: hold\n    window: 5s\n    interval: 100ms\n    probe: {{kind: http, url: '{}'}}\n",
        h.url("/s/svc")
    ));
    let r = run_with(
        &s,
        RunOptions {
            deadline: Some(Duration::from_millis(500)),
            ..RunOptions::default()
        },
    )
    .await;
    let l = result(&r, "long");
    assert_eq!(l.outcome, Error, "{}", l.reason);
    assert!(l.reason.contains("window cut short"), "{}", l.reason);
    assert!(l.reason.contains("run deadline"), "{}", l.reason);
    assert!(
        l.samples >= 2,
        "what was observed is reported: {}",
        l.samples
    );
    assert!(r.interrupted);
    assert!(!r.passed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_run_reports_what_was_observed() {
    let h = Http::start().await;
    h.script("svc", vec![step(200, "ok")]);
    h.script("never", vec![step(503, "no")]);
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: long\n    role: safety\n    mode: hold\n    window: 10s\n    interval: 50ms\n    probe: {{kind: http, url: '{}'}}\n  - id: waiting\n    timeout: 10s\n    interval: 50ms\n    probe: {{kind: http, url: '{}'}}\n",
        h.url("/s/svc"),
        h.url("/s/never")
    ));
    let stopper = Stopper::new();
    let st = stopper.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        st.stop(StopReason::Interrupted);
    });
    let r = runner::run(&s, RunOptions::default(), Arc::new(Quiet), &stopper).await;
    assert!(r.interrupted);
    assert!(!r.passed);
    let l = result(&r, "long");
    assert_eq!(l.outcome, Error);
    assert!(l.reason.contains("interrupted"), "{}", l.reason);
    assert!(l.samples > 0);
    let w = result(&r, "waiting");
    assert_eq!(
        w.outcome, Error,
        "an interrupted converge is not a fail: {}",
        w.reason
    );
    assert!(
        w.reason.contains("last observation: status 503"),
        "{}",
        w.reason
    );
}

fn json_file(dir: &std::path::Path, rv: &str, replicas: u32, label: &str) -> std::path::PathBuf {
    let p = dir.join("ns.json");
    let doc = serde_json::json!({
        "metadata": {"name": "prod", "resourceVersion": rv, "labels": {"app.kubernetes.io/name": label},
                     "managedFields": [{"time": rv}]},
        "spec": {"replicas": replicas}
    });
    std::fs::write(&p, doc.to_string()).unwrap();
    p
}

/// Two baselines the current state equals give two passes: the evidence says which baseline
/// each compared with, so one taken after the agent acted cannot stand for the one before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_result_names_the_baseline_it_compared_with() {
    let dir = tempfile::tempdir().unwrap();
    let f = json_file(dir.path(), "1", 2, "web");
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: strict\n    role: catastrophic\n    mode: unchanged\n    ignore: ['$.spec']\n    probe: {{kind: json, source: {{file: '{}'}}}}\n",
        f.display()
    ));
    let before = runner::take_baseline(&s, 4, &Stopper::new()).await.unwrap();
    json_file(dir.path(), "1", 3, "web");
    let after = runner::take_baseline(&s, 4, &Stopper::new()).await.unwrap();
    let mut seen = Vec::new();
    for b in [before, after] {
        let snap = b.criteria["strict"].clone();
        let r = run_with(
            &s,
            RunOptions {
                baseline: Some(b),
                ..RunOptions::default()
            },
        )
        .await;
        let c = result(&r, "strict");
        assert_eq!(c.outcome, Pass, "{}", c.reason);
        let facts = &c.observations[0].facts["baseline"];
        let digest = verdict_core::digest::raw(&verdict_core::canonical::to_vec(&snap.snapshot));
        assert_eq!(facts["digest"], digest.as_str());
        assert_eq!(facts["taken_at"], snap.taken_at.as_str());
        seen.push(facts["digest"].clone());
    }
    assert_ne!(seen[0], seen[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_with_and_without_ignored_paths() {
    let dir = tempfile::tempdir().unwrap();
    let f = json_file(dir.path(), "1", 2, "web");
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: strict\n    role: catastrophic\n    mode: unchanged\n    probe: {{kind: json, source: {{file: '{p}'}}}}\n  - id: lenient\n    role: catastrophic\n    mode: unchanged\n    ignore: ['$.metadata.resourceVersion', '$.metadata.managedFields']\n    probe: {{kind: json, source: {{file: '{p}'}}}}\n",
        p = f.display()
    ));
    let baseline = runner::take_baseline(&s, 4, &Stopper::new()).await.unwrap();
    assert_eq!(baseline.criteria.len(), 2);

    // Only bookkeeping changed.
    json_file(dir.path(), "2", 2, "web");
    let opts = RunOptions {
        baseline: Some(baseline.clone()),
        ..RunOptions::default()
    };
    let r = run_with(&s, opts.clone()).await;
    let strict = result(&r, "strict");
    assert_eq!(strict.outcome, Fail);
    let paths: Vec<&str> = strict
        .changes
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "$['metadata']['managedFields'][0]['time']",
            "$['metadata']['resourceVersion']"
        ]
    );
    let lenient = result(&r, "lenient");
    assert_eq!(lenient.outcome, Pass, "{}", lenient.reason);
    assert_eq!(r.rollup.cat_v, Some(0.0));

    // A real change shows through the ignore list, by its exact path.
    json_file(dir.path(), "3", 5, "api");
    let r = run_with(&s, opts).await;
    let lenient = result(&r, "lenient");
    assert_eq!(lenient.outcome, Fail);
    let paths: Vec<&str> = lenient
        .changes
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "$['metadata']['labels']['app.kubernetes.io/name']",
            "$['spec']['replicas']"
        ]
    );
    assert!(
        lenient.reason.contains("2 paths changed"),
        "{}",
        lenient.reason
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_without_a_matching_baseline_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = json_file(dir.path(), "1", 2, "web");
    let text = |path: &str| {
        format!(
            "version: 1\ncriteria:\n  - id: same\n    mode: unchanged\n    probe: {{kind: json, source: {{file: '{path}'}}}}\n"
        )
    };
    let s = spec(&text(&f.display().to_string()));
    let r = run(&s).await;
    assert_eq!(result(&r, "same").outcome, Error);
    assert!(result(&r, "same").reason.contains("no baseline"));
    // A baseline taken with another definition is not comparable.
    let other = spec(&text(&format!(
        "{}/../{}",
        dir.path().display(),
        f.strip_prefix(dir.path().parent().unwrap())
            .unwrap()
            .display()
    )));
    let b = runner::take_baseline(&other, 1, &Stopper::new())
        .await
        .unwrap();
    let r = run_with(
        &s,
        RunOptions {
            baseline: Some(b),
            ..RunOptions::default()
        },
    )
    .await;
    assert_eq!(result(&r, "same").outcome, Error);
    assert!(
        result(&r, "same").reason.contains("another definition"),
        "{}",
        result(&r, "same").reason
    );
    // A source that cannot be read cannot be snapshotted: no baseline at all.
    let missing = spec(&text("/nonexistent/ns.json"));
    let failures = runner::take_baseline(&missing, 1, &Stopper::new())
        .await
        .unwrap_err();
    assert_eq!(failures[0].0, "same");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_catches_a_violation_that_recovers_before_the_agent_ends() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("serving");
    std::fs::write(&f, "").unwrap();
    let p = f.display().to_string();
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: stays-up\n    role: safety\n    mode: hold\n    window: 100ms\n    interval: 40ms\n    probe: {{kind: file, path: '{p}'}}\n  - id: up-after\n    probe: {{kind: file, path: '{p}'}}\n"
    ));
    // The agent breaks the service for a while, then repairs it before it ends.
    let r = run_during(
        &s,
        &format!("sleep 0.3; rm '{p}'; sleep 0.4; touch '{p}'; sleep 0.3"),
    )
    .await;
    let up = result(&r, "stays-up");
    assert_eq!(up.outcome, Fail, "{}", up.reason);
    assert!(up.during);
    assert!(up.reason.contains("does not exist"), "{}", up.reason);
    // The violation came after the window's four planned samples (0, 40, 80 and the window's
    // end at 100 ms), and says so rather than "sample 9 of 4".
    assert!(
        up.reason
            .contains("(the window plans 4; sampling went on while the agent ran)"),
        "{}",
        up.reason
    );
    // After the agent, everything looks fine: only sampling during the run saw it.
    assert_eq!(result(&r, "up-after").outcome, Pass);
    let agent = r.agent.as_ref().unwrap();
    assert_eq!(agent.exit_code, Some(0));
    // Sampling started before the agent did.
    let ts = |s: &str| s.parse::<verdict_core::contracts::Timestamp>().unwrap();
    assert!(
        ts(&up.observations[0].at) <= ts(&agent.started_at),
        "{} > {}",
        up.observations[0].at,
        agent.started_at
    );
    assert!(!r.passed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_holds_sample_for_the_whole_agent_run() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("ok");
    std::fs::write(&f, "").unwrap();
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: stays\n    role: catastrophic\n    mode: hold\n    window: 100ms\n    interval: 50ms\n    probe: {{kind: file, path: '{}'}}\n",
        f.display()
    ));
    let r = run_with(
        &s,
        RunOptions {
            agent: Some(vec!["sleep".into(), "0.6".into()]),
            ..RunOptions::default()
        },
    )
    .await;
    let c = result(&r, "stays");
    assert_eq!(c.outcome, Pass, "{}", c.reason);
    assert!(
        c.samples > 3,
        "kept sampling past its window while the agent ran: {}",
        c.samples
    );
    assert_eq!(r.rollup.cat_v, Some(1.0));
    assert!(r.passed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_compares_unchanged_criteria_with_the_state_before_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let f = json_file(dir.path(), "1", 2, "web");
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: prod\n    role: catastrophic\n    mode: unchanged\n    probe: {{kind: json, source: {{file: '{}'}}}}\n",
        f.display()
    ));
    let r = run_during(
        &s,
        &format!(
            "sed -i 's/\"replicas\":2/\"replicas\":0/' '{}'",
            f.display()
        ),
    )
    .await;
    let c = result(&r, "prod");
    assert_eq!(c.outcome, Fail, "{}", c.reason);
    assert_eq!(c.changes.as_ref().unwrap()[0].path, "$['spec']['replicas']");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_a_failed_snapshot_spoils_only_its_own_criterion() {
    let dir = tempfile::tempdir().unwrap();
    let f = json_file(dir.path(), "1", 2, "web");
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: readable\n    role: catastrophic\n    mode: unchanged\n    probe: {{kind: json, source: {{file: '{}'}}}}\n  - id: missing\n    role: catastrophic\n    mode: unchanged\n    probe: {{kind: json, source: {{file: '{}/absent.json'}}}}\n",
        f.display(),
        dir.path().display()
    ));
    let r = run_with(
        &s,
        RunOptions {
            agent: Some(vec!["true".into()]),
            ..RunOptions::default()
        },
    )
    .await;
    assert_eq!(
        result(&r, "readable").outcome,
        Pass,
        "{}",
        result(&r, "readable").reason
    );
    let m = result(&r, "missing");
    assert_eq!(m.outcome, Error);
    assert!(
        m.reason
            .contains("no snapshot could be taken before the agent"),
        "{}",
        m.reason
    );
    assert!(m.reason.contains("absent.json"), "{}", m.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_bounds_the_observations_running_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("lock");
    // Each observation holds a directory as a lock; two at once would fail mkdir.
    let script = format!(
        "mkdir '{l}' && sleep 0.1 && rmdir '{l}'",
        l = lock.display()
    );
    let mut text = String::from("version: 1\ncriteria:\n");
    for i in 0..4 {
        text.push_str(&format!(
            "  - id: c{i}\n    mode: assert\n    probe: {{kind: command, argv: [sh, -c, {}]}}\n",
            serde_json::to_string(&script).unwrap()
        ));
    }
    let s = spec(&text);
    let r = run_with(
        &s,
        RunOptions {
            jobs: 1,
            ..RunOptions::default()
        },
    )
    .await;
    for c in &r.criteria {
        assert_eq!(c.outcome, Pass, "{}: {}", c.id, c.reason);
    }
}

/// Asserts that criterion `id` of `r` is an `error` whose reason says `why`.
fn assert_error(r: &verdict_probes::result::Report, id: &str, why: &str) {
    let c = result(r, id);
    assert_eq!(c.outcome, Error, "{id}: {}", c.reason);
    assert!(c.reason.contains(why), "{id}: {}", c.reason);
}

/// A slow criterion holds the only job slot for two seconds: a hold's samples, due every half
/// second, all wait for it and are then taken together, long after the window they were to
/// watch, and a converge with a half-second timeout observes only after two. Neither saw what
/// its timing promised, so neither passes: each is an `error` (the file they read says "up"
/// throughout, so any other outcome would be invented).
#[tokio::test]
async fn observations_that_waited_for_a_job_slot_past_their_time_prove_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::write(&state, "up\n").unwrap();
    let f = state.display();
    // The slow criterion comes first: on this runtime its task takes the slot first.
    let s = spec(&format!(
        "version: 1\ncriteria:
  - id: slow\n    mode: assert\n    probe: {{kind: command, argv: [sleep, '2']}}
  - id: stays-up\n    role: safety\n    mode: hold\n    window: 1s\n    interval: 500ms\n    probe: {{kind: file, path: '{f}', content: {{equals: \"up\\n\"}}}}
  - id: ready-soon\n    mode: converge\n    timeout: 500ms\n    interval: 100ms\n    probe: {{kind: file, path: '{f}', content: {{equals: \"up\\n\"}}}}
  - id: wide\n    role: safety\n    mode: hold\n    window: 1s\n    interval: 1m\n    probe: {{kind: file, path: '{f}', content: {{equals: \"up\\n\"}}}}\n"
    ));
    let r = run_with(
        &s,
        RunOptions {
            jobs: 1,
            ..RunOptions::default()
        },
    )
    .await;
    assert_eq!(result(&r, "slow").outcome, Pass);
    assert_error(&r, "stays-up", "after it was due");
    assert_error(&r, "ready-soon", "after the timeout 500ms");
    // An interval longer than the window allows no more than the window's own length.
    assert_error(&r, "wide", "after it was due");
    assert!(!r.passed);
}

/// An observation may answer from any instant between its start and its end. A service that
/// holds its answer until it is ready, three seconds on, passed a converge with a one-second
/// timeout (the observation had started in time); a sample of a hold that took a second and a
/// half to answer left that much of the window unwatched, and the hold passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observation_that_answers_late_proves_nothing_about_the_time_before() {
    let h = Http::start().await;
    h.script("held", vec![slow(200, "ok", 3_000)]);
    h.script(
        "gappy",
        vec![
            step(200, "ok"),
            slow(200, "ok", 1_500),
            step(200, "ok"),
            step(200, "ok"),
            step(200, "ok"),
        ],
    );
    let s = spec(&format!(
        "version: 1\ncriteria:
  - id: ready-in-1s\n    mode: converge\n    timeout: 1s\n    interval: 100ms\n    probe: {{kind: http, url: '{}', timeout: 5s}}
  - id: stays-up\n    role: safety\n    mode: hold\n    window: 2s\n    interval: 500ms\n    probe: {{kind: http, url: '{}', timeout: 5s}}\n",
        h.url("/s/held"),
        h.url("/s/gappy")
    ));
    let r = run(&s).await;
    assert_error(&r, "ready-in-1s", "after the timeout 1s");
    assert_error(&r, "stays-up", "after it was due");
    // `timeout: 0` is one observation and claims no time: a slow answer still counts.
    h.script("once", vec![slow(200, "ok", 1_000)]);
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: once\n    mode: converge\n    timeout: 0\n    probe: {{kind: http, url: '{}', timeout: 5s}}\n",
        h.url("/s/once")
    ));
    let r = run(&s).await;
    assert_eq!(
        result(&r, "once").outcome,
        Pass,
        "{}",
        result(&r, "once").reason
    );
}

/// Each sample of a hold takes longer than its interval: the next is due before the last has
/// ended, so the window is watched in gaps wider than the interval it promised. The hold is an
/// `error`, as it is when a criterion timeout shorter than the samples passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_samples_outlast_its_interval_is_not_vouched_for() {
    let s = spec(
        "version: 1\ncriteria:
  - id: gappy\n    role: safety\n    mode: hold\n    window: 2s\n    interval: 500ms\n    probe: {kind: command, argv: [sleep, '1.2'], timeout: 5s}
  - id: past-timeout\n    role: safety\n    mode: hold\n    window: 1s\n    interval: 1s\n    timeout: 1s\n    probe: {kind: command, argv: [sleep, '1.5'], timeout: 5s}\n",
    );
    let r = run(&s).await;
    assert_error(&r, "gappy", "after it was due");
    assert_error(&r, "past-timeout", "the criterion timeout 1s passed");
}

/// A service that stops answering during a hold: by default the hold is an `error` (the system
/// could not be observed); with `unreachable: fail` the criterion asked for the service to stay
/// reachable, so the hold fails at that sample.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_stops_answering_fails_a_hold_only_with_unreachable_fail() {
    for (option, expected) in [
        ("", Error),
        (", unreachable: error", Error),
        (", unreachable: fail", Fail),
    ] {
        let h = Http::start().await;
        h.script(
            "svc",
            vec![step(200, "ok"), step(200, "ok"), slow(200, "ok", 5_000)],
        );
        let s = spec(&format!(
            "version: 1\ncriteria:\n  - id: stays-up\n    role: safety\n    mode: hold\n    window: 2s\n    interval: 50ms\n    probe: {{kind: http, url: '{}', timeout: 200ms{option}}}\n",
            h.url("/s/svc")
        ));
        let r = run(&s).await;
        let c = result(&r, "stays-up");
        assert_eq!(c.outcome, expected, "{option:?}: {}", c.reason);
        if expected == Fail {
            assert!(
                c.reason.contains("unreachable (counted as a failure)"),
                "{}",
                c.reason
            );
            assert_eq!(c.samples, 3, "the violation ends the hold");
        }
        assert!(!r.passed);
    }
}

/// The agent breaks the service just before it exits, past the window and before the next
/// sample would be due: the hold samples once more as soon as the agent has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_samples_once_more_when_the_agent_ends_past_its_window() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("serving");
    std::fs::write(&f, "").unwrap();
    let p = f.display().to_string();
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: stays-up\n    role: safety\n    mode: hold\n    window: 1s\n    interval: 1s\n    probe: {{kind: file, path: '{p}'}}\n"
    ));
    let r = run_during(&s, &format!("sleep 1.5; rm '{p}'")).await;
    let up = result(&r, "stays-up");
    assert_eq!(up.outcome, Fail, "{}", up.reason);
    assert!(up.reason.contains("does not exist"), "{}", up.reason);
    assert_eq!(up.samples, 3);
    assert!(!r.passed);
}

/// The agent backgrounds a child and exits: the child would act on the system while the
/// criteria after the agent observe it. The agent's whole process group dies when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("late");
    let s = spec(
        "version: 1\ncriteria:\n  - id: t\n    mode: assert\n    probe: {kind: command, argv: ['true']}\n",
    );
    let r = run_during(
        &s,
        &format!(
            "(sleep 1; touch '{}') >/dev/null 2>&1 & exit 0",
            marker.display()
        ),
    )
    .await;
    assert_eq!(r.agent.as_ref().unwrap().exit_code, Some(0));
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(!marker.exists(), "a child of the agent outlived it");
}

/// The agent marks the production database `ephemeral` and scales it to zero; the ignore
/// filter `$.items[?@.ephemeral == true]` matched it in the current snapshot and hid both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ignore_filter_the_agent_makes_match_hides_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("dbs.json");
    std::fs::write(
        &f,
        r#"{"items": [{"name": "scratch", "ephemeral": true, "replicas": 1}, {"name": "prod-db", "replicas": 3}]}"#,
    )
    .unwrap();
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: dbs\n    role: catastrophic\n    mode: unchanged\n    ignore: ['$.items[?@.ephemeral == true]']\n    probe: {{kind: json, source: {{file: '{}'}}}}\n",
        f.display()
    ));
    let baseline = runner::take_baseline(&s, 4, &Stopper::new()).await.unwrap();
    std::fs::write(
        &f,
        r#"{"items": [{"name": "scratch", "ephemeral": true, "replicas": 7}, {"name": "prod-db", "ephemeral": true, "replicas": 0}]}"#,
    )
    .unwrap();
    let r = run_with(
        &s,
        RunOptions {
            baseline: Some(baseline),
            ..RunOptions::default()
        },
    )
    .await;
    let c = result(&r, "dbs");
    assert_eq!(c.outcome, Fail, "{}", c.reason);
    let paths: Vec<&str> = c
        .changes
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    assert_eq!(
        paths,
        ["$['items'][1]['ephemeral']", "$['items'][1]['replicas']"]
    );
}

/// A converge that saw the system fail cleanly and then hang until its deadline: the failure
/// is what was observed (rework), not an error (blocked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converge_that_failed_then_hung_fails() {
    let h = Http::start().await;
    h.script("bad", vec![step(500, "broken"), slow(200, "late", 2000)]);
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: web\n    timeout: 1s\n    interval: 100ms\n    probe: {{kind: http, url: '{}', status: 200, timeout: 200ms}}\n",
        h.url("/s/bad")
    ));
    let r = run(&s).await;
    let w = result(&r, "web");
    assert_eq!(w.outcome, Fail, "{}", w.reason);
    assert!(w.reason.contains("last: timed out"), "{}", w.reason);
    assert!(
        w.reason
            .contains("last failure (observation 1): status 500"),
        "{}",
        w.reason
    );
}

/// A server that stops accepting connections but keeps answering on one it accepted before:
/// each sample opens its own connection, so the hold sees the refusal at its second sample
/// instead of passing over the old connection; so does a converge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_opens_its_own_connection() {
    let addr = one_connection_http().await;
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: stays-up\n    role: safety\n    mode: hold\n    window: 400ms\n    interval: 100ms\n    probe: {{kind: http, url: 'http://{addr}/', body: {{equals: ok}}, unreachable: fail}}\n"
    ));
    let r = run(&s).await;
    let c = result(&r, "stays-up");
    assert_eq!(c.outcome, Fail, "{}", c.reason);
    assert!(
        c.reason.contains("unreachable (counted as a failure)"),
        "{}",
        c.reason
    );
    assert_eq!(
        c.samples, 2,
        "the first sample passed, the second was refused"
    );

    let addr = one_connection_http().await;
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: up\n    mode: converge\n    timeout: 300ms\n    interval: 100ms\n    probe: {{kind: http, url: 'http://{addr}/', status: 404}}\n"
    ));
    let r = run(&s).await;
    let c = result(&r, "up");
    // Its first sample failed cleanly (200, not 404) and every later one was refused a
    // connection: a converge that saw a clean failure fails.
    assert_eq!(c.outcome, Fail, "{}", c.reason);
    assert!(c.reason.contains("Connection refused"), "{}", c.reason);
    assert!(c.samples >= 2, "{}", c.samples);
}

/// An `unchanged` snapshot of output that is not text is refused, not kept with its bad bytes
/// replaced: `\xff` and `\xfe` would both become U+FFFD and a change would compare equal.
#[tokio::test]
async fn a_snapshot_of_output_that_is_not_text_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("out.bin");
    std::fs::write(&f, b"state \xff\n").unwrap();
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: bytes\n    mode: unchanged\n    probe: {{kind: command, argv: [cat, '{}']}}\n",
        f.display()
    ));
    let failures = runner::take_baseline(&s, 1, &Stopper::new())
        .await
        .unwrap_err();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].1.contains("stdout is not UTF-8 text"),
        "{failures:?}"
    );
}

/// A hold whose interval does not divide its window (`window: 1900ms`, `interval: 1s`) sampled
/// at 0 and 1 s and passed, never looking at the last 0.9 s. It samples at the window's end too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_samples_at_the_end_of_a_window_its_interval_does_not_divide() {
    let h = Http::start().await;
    h.script(
        "late",
        vec![
            step(200, "ok"),
            step(200, "ok"),
            step(200, "ok"),
            step(500, "broken"),
        ],
    );
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: tail\n    role: safety\n    mode: hold\n    window: 450ms\n    interval: 200ms\n    probe: {{kind: http, url: '{}', status: 200}}\n",
        h.url("/s/late")
    ));
    let r = run(&s).await;
    let c = result(&r, "tail");
    assert_eq!(c.outcome, Fail, "{}", c.reason);
    assert!(
        c.reason.contains("violated at sample 4 of 4"),
        "{}",
        c.reason
    );
}

/// A run stopped (Ctrl-C, `--deadline`) before a criterion observes does not vouch for it: the
/// criterion is an `error`, never a pass, every time (the stop is checked first whenever the
/// criterion could also finish).
#[tokio::test]
async fn a_criterion_of_a_stopped_run_is_never_a_pass() {
    let s = spec(
        "version: 1\ncriteria:\n  - id: quick\n    mode: assert\n    probe: {kind: file, path: /, type: dir}\n",
    );
    for _ in 0..20 {
        let stopper = Stopper::new();
        stopper.stop(StopReason::Interrupted);
        let r = runner::run(&s, RunOptions::default(), Arc::new(Quiet), &stopper).await;
        let c = result(&r, "quick");
        assert_eq!(c.outcome, Error, "{}", c.reason);
        assert!(!r.passed);
    }
}

/// Three more ways a hold or converge passed on time it did not watch: under `--during`, a
/// window its interval does not divide skipped the next slot of the grid (samples at 0, 1 and
/// 8 s of a 4 s hold, missing a breakage from 1.5 to 7.5 s); a converge whose interval equals
/// its timeout accepted an answer given at twice the timeout. And one way an honest spec
/// failed: a slow probe's last converge observation, placed at the deadline, answered past it
/// however early the service was ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_keep_their_grid_and_converges_are_answered_by_their_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::write(&state, "ok\n").unwrap();
    let f = state.display();
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: watch\n    role: safety\n    mode: hold\n    window: 1s\n    interval: 4s\n    probe: {{kind: file, path: '{f}', content: {{equals: \"ok\\n\"}}}}\n"
    ));
    let r = run_during(
        &s,
        &format!("sleep 1.5; echo bad > '{f}'; sleep 6; echo ok > '{f}'; sleep 2.5"),
    )
    .await;
    let c = result(&r, "watch");
    assert_eq!(c.outcome, Fail, "{}", c.reason);

    let h = Http::start().await;
    h.script("held", vec![slow(200, "ok", 3_900)]);
    h.script(
        "slow",
        vec![
            slow(503, "starting", 1_600),
            slow(503, "starting", 1_600),
            slow(503, "starting", 1_600),
            slow(200, "ok", 1_600),
        ],
    );
    h.script("once", vec![step(200, "ok")]);
    let s = spec(&format!(
        "version: 1\ncriteria:
  - id: twice-late\n    mode: converge\n    timeout: 2s\n    interval: 2s\n    probe: {{kind: http, url: '{}', timeout: 10s}}
  - id: slow-but-ready\n    mode: converge\n    timeout: 10s\n    interval: 1s\n    probe: {{kind: http, url: '{}', status: 200, timeout: 5s}}
  - id: single\n    role: safety\n    mode: hold\n    window: 0\n    interval: 5s\n    probe: {{kind: command, shell: 'sleep 0.7; true'}}\n",
        h.url("/s/held"),
        h.url("/s/slow"),
    ));
    let r = run(&s).await;
    assert_error(&r, "twice-late", "after the timeout 2s");
    let c = result(&r, "slow-but-ready");
    assert_eq!(c.outcome, Pass, "{}", c.reason);
    let c = result(&r, "single");
    assert_eq!(c.outcome, Pass, "{}", c.reason);
}
