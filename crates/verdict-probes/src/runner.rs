//! Running a spec: criteria run concurrently on tokio; `jobs` bounds how many observations run
//! at once (a hold waiting for its next sample holds no slot). Ctrl-C or the run deadline stops
//! every criterion where it is, and each reports what it had observed.
//!
//! With an agent command (`--during`), the run goes: record log positions and take in-memory
//! baselines for `unchanged` criteria that have none; start the safety and catastrophic hold
//! criteria and wait until each has taken its first sample; run the agent; when it ends, run
//! every other criterion while the holds finish their windows.

use crate::baseline::{Baseline, Snapshot};
use crate::check::{Check, Plan};
use crate::load::Spec;
use crate::probe::ProbeEnv;
use crate::result::{AgentRun, CriterionResult, Report};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::time::Instant;
use verdict_core::contracts::CheckOutcome;

/// Why a run stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Ctrl-C (or the caller) stopped it.
    Interrupted,
    /// The run deadline passed.
    Deadline,
}

/// Something that happened during a run, for progress displays and measurements.
#[derive(Debug)]
pub enum Event<'a> {
    /// A criterion started.
    Started {
        /// It.
        check: &'a Check,
    },
    /// An observation finished.
    Sample {
        /// Of which criterion.
        check: &'a Check,
        /// 0-based number.
        index: u64,
        /// When it was due.
        scheduled: std::time::Instant,
        /// When it started.
        started: std::time::Instant,
        /// What it found.
        outcome: CheckOutcome,
    },
    /// A criterion finished.
    Finished {
        /// Its result.
        result: &'a CriterionResult,
    },
    /// The agent started.
    AgentStarted {
        /// Its command.
        argv: &'a [String],
    },
    /// The agent ended.
    AgentEnded {
        /// What it did.
        run: &'a AgentRun,
    },
}

/// Receives run events; must be quick (it is called on the runtime's threads).
pub trait Observer: Send + Sync {
    /// One event.
    fn event(&self, event: &Event<'_>);
}

/// An observer that ignores everything.
#[derive(Debug, Default)]
pub struct Quiet;

impl Observer for Quiet {
    fn event(&self, _: &Event<'_>) {}
}

/// Stops a run from outside (Ctrl-C handler, tests).
#[derive(Debug, Clone)]
pub struct Stopper {
    tx: Arc<watch::Sender<Option<StopReason>>>,
}

impl Default for Stopper {
    fn default() -> Self {
        Self::new()
    }
}

impl Stopper {
    /// A stopper that has not fired.
    #[must_use]
    pub fn new() -> Self {
        Self {
            tx: Arc::new(watch::channel(None).0),
        }
    }

    /// Stops the run (the first reason wins).
    pub fn stop(&self, reason: StopReason) {
        self.tx.send_if_modified(|v| {
            if v.is_none() {
                *v = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// Whether and why it fired.
    #[must_use]
    pub fn reason(&self) -> Option<StopReason> {
        *self.tx.borrow()
    }

    fn subscribe(&self) -> watch::Receiver<Option<StopReason>> {
        self.tx.subscribe()
    }
}

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Observations running at once (at least 1).
    pub jobs: usize,
    /// The whole run must end within this.
    pub deadline: Option<Duration>,
    /// Baseline for `unchanged` criteria.
    pub baseline: Option<Baseline>,
    /// The agent command of `--during`.
    pub agent: Option<Vec<String>>,
}

/// Default number of concurrent observations.
pub const DEFAULT_JOBS: usize = 64;

/// What every criterion of a run shares.
pub(crate) struct RunCtx {
    pub(crate) env: ProbeEnv,
    pub(crate) permits: Semaphore,
    stop: watch::Receiver<Option<StopReason>>,
    agent_done: watch::Receiver<bool>,
    baseline: Option<Baseline>,
    /// Why the snapshot of a criterion taken before the agent failed, by criterion id.
    snapshot_failures: HashMap<String, String>,
    pub(crate) observer: Arc<dyn Observer>,
}

impl RunCtx {
    /// Resolves when the run is stopped.
    pub(crate) async fn stopped(&self) -> StopReason {
        let mut rx = self.stop.clone();
        let reason = rx
            .wait_for(Option::is_some)
            .await
            .ok()
            .map(|r| (*r).unwrap_or(StopReason::Interrupted));
        match reason {
            Some(r) => r,
            // The stopper is gone: nobody can stop this run any more.
            None => std::future::pending().await,
        }
    }

    /// Whether no agent is running.
    pub(crate) fn agent_done(&self) -> bool {
        *self.agent_done.borrow()
    }

    /// Sleeps until `t` (`true`) or until the agent ends (`false`), whichever comes first.
    pub(crate) async fn sleep_until_or_agent_done(&self, t: Instant) -> bool {
        let mut done = self.agent_done.clone();
        tokio::select! {
            () = tokio::time::sleep_until(t) => true,
            _ = done.wait_for(|d| *d) => false,
        }
    }

    /// The baseline snapshot of an `unchanged` criterion, or why there is none.
    pub(crate) fn baseline_for(&self, check: &Check) -> Result<Snapshot, String> {
        if let Some(why) = self.snapshot_failures.get(check.id.as_str()) {
            return Err(format!(
                "no snapshot could be taken before the agent: {why}"
            ));
        }
        let b = self.baseline.as_ref().ok_or(
            "no baseline: take one with --baseline-out before the agent acts, or use --during",
        )?;
        let s = b
            .criteria
            .get(check.id.as_str())
            .ok_or_else(|| format!("the baseline has no snapshot of {}", check.id))?;
        if s.definition_digest != check.definition_digest {
            return Err(format!(
                "the baseline of {} was taken with another definition ({})",
                check.id, s.definition_digest
            ));
        }
        Ok(s.clone())
    }
}

fn context(
    opts: &RunOptions,
    stopper: &Stopper,
    observer: Arc<dyn Observer>,
    agent_done: watch::Receiver<bool>,
) -> RunCtx {
    RunCtx {
        env: ProbeEnv::default(),
        permits: Semaphore::new(opts.jobs.clamp(1, Semaphore::MAX_PERMITS)),
        stop: stopper.subscribe(),
        agent_done,
        baseline: opts.baseline.clone(),
        snapshot_failures: HashMap::new(),
        observer,
    }
}

type SnapshotTask = tokio::task::JoinHandle<Result<crate::probe::Sample, StopReason>>;

/// Snapshots every `unchanged` criterion: the ones taken, and why the others could not be.
async fn snapshot_all(
    spec: &Spec,
    jobs: usize,
    stopper: &Stopper,
) -> (Baseline, Vec<(String, String)>) {
    let (_tx, done) = watch::channel(true);
    let opts = RunOptions {
        jobs,
        ..RunOptions::default()
    };
    let ctx = Arc::new(context(&opts, stopper, Arc::new(Quiet), done));
    let handles: Vec<(Arc<Check>, SnapshotTask)> = spec
        .checks
        .iter()
        .filter(|c| c.plan == Plan::Unchanged)
        .map(|c| {
            let (c2, ctx) = (c.clone(), ctx.clone());
            let h = tokio::spawn(async move {
                let _permit = ctx.permits.acquire().await;
                tokio::select! {
                    s = c2.probe.observe(&ctx.env, false) => Ok(s),
                    r = ctx.stopped() => Err(r),
                }
            });
            (c.clone(), h)
        })
        .collect();
    let mut baseline = Baseline::new();
    let mut failures = Vec::new();
    for (c, h) in handles {
        let id = c.id.to_string();
        match h.await {
            Ok(Ok(s)) if s.outcome == CheckOutcome::Pass => match s.snapshot {
                Some(v) => {
                    baseline.criteria.insert(
                        id,
                        Snapshot {
                            definition_digest: c.definition_digest.clone(),
                            taken_at: crate::clock::now(),
                            snapshot: v,
                        },
                    );
                }
                None => failures.push((id, "the probe gave no snapshot".to_owned())),
            },
            Ok(Ok(s)) => failures.push((id, s.reason)),
            Ok(Err(_)) => failures.push((id, "interrupted".to_owned())),
            Err(e) => failures.push((id, format!("the snapshot task failed: {e}"))),
        }
    }
    (baseline, failures)
}

/// Takes snapshots of every `unchanged` criterion (for `--baseline-out`). Every snapshot must
/// succeed; otherwise the failures are returned and no baseline exists.
pub async fn take_baseline(
    spec: &Spec,
    jobs: usize,
    stopper: &Stopper,
) -> Result<Baseline, Vec<(String, String)>> {
    let (baseline, mut failures) = snapshot_all(spec, jobs, stopper).await;
    if let Err(why) = kill_orphans().await {
        // A process left running can still change what was snapshotted, or the file.
        failures.extend(baseline.criteria.keys().map(|id| (id.clone(), why.clone())));
    }
    if failures.is_empty() {
        Ok(baseline)
    } else {
        Err(failures)
    }
}

/// Hold start offsets are multiples of this: criteria that share a slot sample together, so
/// the runtime wakes once for a few of them rather than once for each.
pub const STAGGER_STEP: Duration = Duration::from_millis(10);

/// Phase offsets so hold criteria do not all sample on the same instant: the k-th of n holds
/// starts `k/n` of its interval (at most one second) late, rounded down to [`STAGGER_STEP`].
fn offsets(checks: &[Arc<Check>]) -> Vec<Duration> {
    let holds = checks
        .iter()
        .filter(|c| matches!(c.plan, Plan::Hold { .. }))
        .count()
        .max(1) as u128;
    let step = STAGGER_STEP.as_nanos();
    let mut k: u128 = 0;
    checks
        .iter()
        .map(|c| match c.plan {
            Plan::Hold { interval, .. } => {
                let spread = interval.std().min(Duration::from_secs(1)).as_nanos();
                let raw = spread * k / holds;
                k += 1;
                Duration::from_nanos(u64::try_from(raw / step * step).unwrap_or(0))
            }
            _ => Duration::ZERO,
        })
        .collect()
}

/// What the agent did, and why the run cannot be vouched for if the agent left processes
/// that could not be killed.
async fn run_agent(argv: &[String], ctx: &RunCtx) -> (AgentRun, Result<(), String>) {
    let started_at = crate::clock::now().to_string();
    let finish = |exit_code: Option<i32>, note: Option<String>| AgentRun {
        argv: argv.to_vec(),
        exit_code,
        note,
        started_at: started_at.clone(),
        finished_at: crate::clock::now().to_string(),
    };
    let Some((program, args)) = argv.split_first() else {
        return (finish(None, Some("empty agent command".into())), Ok(()));
    };
    // The agent is someone else's program: it gets the allowlisted environment only. It runs
    // in its own process group, killed whole when it ends, so nothing it started keeps acting
    // on the system while the criteria after it observe.
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(verdict_core::child_env::inherited(std::env::vars_os()));
    let mut group = match crate::process::Group::spawn(&mut cmd) {
        Ok(g) => g,
        Err(e) => {
            return (
                finish(None, Some(format!("cannot start {program:?}: {e}"))),
                Ok(()),
            );
        }
    };
    let run = tokio::select! {
        status = group.wait() => match status {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                finish(s.code(), s.signal().map(|sig| format!("killed by signal {sig}")))
            }
            Err(e) => finish(None, Some(format!("cannot wait for the agent: {e}"))),
        },
        r = ctx.stopped() => {
            // The agent is stopped with the run; nothing it does afterwards is observed.
            group.kill();
            let _ = group.wait().await;
            finish(None, Some(format!("stopped: {}", match r {
                StopReason::Interrupted => "interrupted",
                StopReason::Deadline => "run deadline reached",
            })))
        }
    };
    drop(group);
    // What the agent detached from its group (setsid) dies too, where the host adopts orphans.
    let swept = kill_orphans().await;
    (run, swept)
}

/// [`crate::process::kill_orphans`] off the async thread: it waits for the processes it kills.
async fn kill_orphans() -> Result<(), String> {
    match tokio::task::spawn_blocking(crate::process::kill_orphans).await {
        Ok(swept) => swept.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the sweep of leftover processes failed: {e}")),
    }
}

/// Turns every pass into an error when processes the run's programs detached outlived it:
/// they could have made the system look right while observed, and can still act after.
/// Failures stay failures: what was seen failing was not made to fail by them.
fn vouch_for_none(results: &mut [CriterionResult], why: &str) {
    for r in results {
        if r.outcome == CheckOutcome::Pass {
            r.outcome = CheckOutcome::Error;
            r.reason = format!("{why}; the pass cannot be vouched for ({})", r.reason);
        }
    }
}

/// Records where "since the run began" starts for every criterion, at once. Each is bounded
/// by its probe's timeout; stopping the run leaves the ones not done unrecorded (their
/// criteria then report it).
async fn mark_starts(spec: &Spec, stopper: &Stopper) {
    let mut marks = tokio::task::JoinSet::new();
    for c in &spec.checks {
        let c = c.clone();
        marks.spawn(async move { c.probe.mark_start().await });
    }
    let mut stop = stopper.subscribe();
    tokio::select! {
        () = async { while marks.join_next().await.is_some() {} } => {}
        _ = stop.wait_for(Option::is_some) => marks.abort_all(),
    }
}

/// Runs every criterion of `spec` and assembles the report.
pub async fn run(
    spec: &Spec,
    mut opts: RunOptions,
    observer: Arc<dyn Observer>,
    stopper: &Stopper,
) -> Report {
    let started_at = crate::clock::now().to_string();
    if opts.jobs == 0 {
        opts.jobs = DEFAULT_JOBS;
    }
    let timer = opts.deadline.map(|d| {
        let s = stopper.clone();
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            s.stop(StopReason::Deadline);
        })
    });
    // Log positions first: "since the run began" means before anything else happens.
    mark_starts(spec, stopper).await;
    let during = opts.agent.is_some();
    let mut snapshot_failures = HashMap::new();
    if during {
        // Unchanged criteria without a baseline file compare with the state before the agent.
        let missing = spec.checks.iter().any(|c| {
            c.plan == Plan::Unchanged
                && opts
                    .baseline
                    .as_ref()
                    .is_none_or(|b| !b.criteria.contains_key(c.id.as_str()))
        });
        if missing {
            // A snapshot that fails leaves its criterion without one; it then reports why.
            let (taken, failed) = snapshot_all(spec, opts.jobs, stopper).await;
            let mut b = opts.baseline.take().unwrap_or_default();
            for (k, v) in taken.criteria {
                b.criteria.entry(k).or_insert(v);
            }
            opts.baseline = Some(b);
            snapshot_failures = failed.into_iter().collect();
        }
    }
    let (agent_tx, agent_rx) = watch::channel(!during);
    let mut ctx = context(&opts, stopper, observer.clone(), agent_rx);
    ctx.snapshot_failures = snapshot_failures;
    let ctx = Arc::new(ctx);
    let offsets = offsets(&spec.checks);
    let mut handles: Vec<Option<tokio::task::JoinHandle<CriterionResult>>> =
        (0..spec.checks.len()).map(|_| None).collect();
    let mut agent = None;
    let mut leftover = None;
    if let Some(argv) = &opts.agent {
        let mut firsts = Vec::new();
        for (i, c) in spec.checks.iter().enumerate() {
            if c.samples_during() {
                let (tx, rx) = oneshot::channel();
                firsts.push(rx);
                let offset = offsets.get(i).copied().unwrap_or_default();
                if let Some(slot) = handles.get_mut(i) {
                    *slot = Some(tokio::spawn(crate::modes::run_check(
                        c.clone(),
                        ctx.clone(),
                        offset,
                        true,
                        Some(tx),
                    )));
                }
            }
        }
        for rx in firsts {
            // A criterion that ended without sampling drops its sender; that is fine here.
            let _ = rx.await;
        }
        observer.event(&Event::AgentStarted { argv });
        let (run, swept) = run_agent(argv, &ctx).await;
        leftover = swept.err();
        observer.event(&Event::AgentEnded { run: &run });
        agent = Some(run);
        let _ = agent_tx.send(true);
    }
    for (i, c) in spec.checks.iter().enumerate() {
        if let Some(slot) = handles.get_mut(i)
            && slot.is_none()
        {
            let offset = offsets.get(i).copied().unwrap_or_default();
            *slot = Some(tokio::spawn(crate::modes::run_check(
                c.clone(),
                ctx.clone(),
                offset,
                false,
                None,
            )));
        }
    }
    let mut results = Vec::with_capacity(handles.len());
    for (i, h) in handles.into_iter().enumerate() {
        let Some(check) = spec.checks.get(i) else {
            continue;
        };
        let r = match h {
            Some(h) => match h.await {
                Ok(r) => r,
                Err(e) => CriterionResult::without_observation(
                    check,
                    CheckOutcome::Error,
                    format!("the criterion's task failed: {e}"),
                    crate::clock::now().to_string(),
                ),
            },
            None => CriterionResult::without_observation(
                check,
                CheckOutcome::Error,
                "not run".into(),
                crate::clock::now().to_string(),
            ),
        };
        results.push(r);
    }
    if let Err(why) = kill_orphans().await {
        leftover = Some(why);
    }
    if let Some(why) = &leftover {
        vouch_for_none(&mut results, why);
    }
    let interrupted = stopper.reason().is_some();
    if let Some(t) = timer {
        t.abort();
    }
    Report::new(
        spec.source_digest.clone(),
        started_at,
        crate::clock::now().to_string(),
        interrupted,
        agent,
        results,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftover_processes_turn_passes_into_errors_and_keep_failures() {
        let spec = crate::load::load_bytes(
            b"version: 1\ncriteria:\n  - id: t\n    mode: assert\n    probe: {kind: command, argv: ['true']}\n",
            crate::load::Format::Yaml,
            &std::collections::BTreeMap::new(),
        )
        .unwrap();
        let check = &spec.checks[0];
        let at = crate::clock::now().to_string();
        let mut results = vec![
            CriterionResult::without_observation(
                check,
                CheckOutcome::Pass,
                "ok".into(),
                at.clone(),
            ),
            CriterionResult::without_observation(check, CheckOutcome::Fail, "bad".into(), at),
        ];
        vouch_for_none(&mut results, "2 processes were still running");
        assert_eq!(results[0].outcome, CheckOutcome::Error);
        assert!(
            results[0]
                .reason
                .starts_with("2 processes were still running"),
            "{}",
            results[0].reason
        );
        assert_eq!(results[1].outcome, CheckOutcome::Fail);
    }
}
