//! The four modes: how a criterion's observations are placed in time and what they add up to.
//!
//! - `assert`: one observation decides.
//! - `converge`: observe until a pass or the deadline; waits start at `interval` and double up
//!   to `max_interval`; the last wait is cut to end exactly at the deadline, where one more
//!   observation is made. Failures and errors keep the poll going; at the deadline the result
//!   is `fail` if any observation failed (errors after a clean failure do not make it an
//!   error), else `error`, and the reason names the last observation and the last failure or
//!   error seen.
//! - `hold`: samples at `start + k·interval` for `k = 0..=window/interval`. The first failing
//!   sample fails the criterion and sampling stops (a violation sticks). A sample that could not
//!   observe makes a would-be pass an `error`, and so does a sample that had not finished within
//!   [`slack`] of when it was due (it waited for a job slot, or for its own slow predecessor,
//!   or took that long to look): what it saw may be from any instant between its start and its
//!   end, so the time between it and the sample before went unobserved. A window cut short
//!   (criterion timeout, run deadline, Ctrl-C) is an `error`, never a pass. Under `--during` a
//!   hold keeps sampling until both its window is over and the agent has ended.
//!
//! A converge's pass counts only from an observation that had finished by its timeout (within
//! [`SLACK_FLOOR`] of scheduling noise): one that waited past it for a job slot, or that took
//! until then to answer, shows the state after the timeout, not within it, and the criterion is
//! an `error`. Its last observation starts as long before the deadline as the one before it
//! took. (`timeout: 0` is one observation, which claims no time.)
//! - `unchanged`: one snapshot, compared with the baseline.

use crate::check::{Check, Plan};
use crate::diff;
use crate::duration::Dur;
use crate::result::{CriterionResult, Kept, Observed};
use crate::runner::{Event, RunCtx, StopReason};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;
use verdict_core::contracts::CheckOutcome;

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn dur_text(d: Duration) -> String {
    Dur::from_millis(ms(d)).to_string()
}

/// How long after it was due a hold's sample may finish and still count as made then: the
/// spacing the plan gives its samples (`interval`, or the whole `span` when that is shorter: the
/// window), and never less than [`SLACK_FLOOR`] (a loaded machine's scheduling). An observation's answer may come from any instant between its
/// start and its end, so two consecutive ones that each finish within this of their due times
/// are never further apart than their planned spacing plus this.
pub(crate) fn slack(interval: Dur, span: Dur) -> Duration {
    interval.std().min(span.std()).max(SLACK_FLOOR)
}

/// The least [`slack`] allows.
pub(crate) const SLACK_FLOOR: Duration = Duration::from_millis(500);

/// One observation: waits for a job slot, observes, reports the sample. Stopping is handled
/// once per criterion by [`run_check`], which drops this future where it stands.
async fn sample(
    ctx: &RunCtx,
    check: &Check,
    judge: bool,
    index: u64,
    scheduled: Instant,
) -> (Observed, Option<Value>) {
    let permit = ctx.permits.acquire().await.ok();
    let started = Instant::now();
    let at_nanos = crate::clock::now_nanos();
    let mut s = check.probe.observe(&ctx.env, judge).await;
    drop(permit);
    let took = started.elapsed();
    ctx.observer.event(&Event::Sample {
        check,
        index,
        scheduled: scheduled.into_std(),
        started: started.into_std(),
        outcome: s.outcome,
    });
    let snapshot = s.snapshot.take();
    (
        Observed {
            index,
            at_nanos,
            duration_ms: ms(took),
            sample: s,
        },
        snapshot,
    )
}

/// What a mode concluded (the observations are in the [`Kept`] it was given).
type Verdict = (CheckOutcome, String);

fn stopped_reason(r: StopReason) -> &'static str {
    match r {
        StopReason::Interrupted => "interrupted",
        StopReason::Deadline => "the run deadline was reached",
    }
}

/// Samples a hold takes over its window: one every interval from its start, and one at the
/// window's end when the interval does not divide it, so no tail of the window goes unseen.
fn planned_samples(window: Dur, interval: Dur) -> u64 {
    let (w, i) = (window.as_millis(), interval.as_millis().max(1));
    w / i + 1 + u64::from(w % i != 0)
}

/// When a hold's sample `k` is due: every interval from the start, the last planned one no
/// later than the window's end.
fn hold_sample_at(start: Instant, window: Dur, interval: Dur, k: u64) -> Instant {
    let every = interval
        .std()
        .saturating_mul(u32::try_from(k).unwrap_or(u32::MAX));
    start + every.min(window.std())
}

async fn assert(
    ctx: &RunCtx,
    check: &Check,
    kept: &mut Kept,
    first: &mut Option<oneshot::Sender<()>>,
) -> Verdict {
    let (o, _) = sample(ctx, check, true, 0, Instant::now()).await;
    let v = (o.outcome(), o.reason().to_owned());
    kept.push(o);
    signal(first);
    v
}

async fn converge(
    ctx: &RunCtx,
    check: &Check,
    plan: (Dur, Dur, Dur),
    kept: &mut Kept,
    first: &mut Option<oneshot::Sender<()>>,
) -> Verdict {
    let (timeout, interval, max_interval) = plan;
    let start = Instant::now();
    let deadline = start + timeout.std();
    let mut wait = interval.std();
    let mut next = start;
    let mut index = 0;
    loop {
        let (o, _) = sample(ctx, check, true, index, next).await;
        signal(first);
        index += 1;
        let ended = Instant::now();
        let took = ended.saturating_duration_since(next);
        // `timeout: 0` is one observation, as an assert is: it claims no time to be met. Any
        // other pass must have been answered by the deadline, within scheduling noise.
        if o.outcome() == CheckOutcome::Pass && !timeout.is_zero() && ended > deadline + SLACK_FLOOR
        {
            // The state held when this observation was made, at some instant up to its end,
            // past the timeout: whether it held within it was not observed.
            let reason = format!(
                "the expectation held at observation {}, which ended {} after the timeout {timeout} (it waited for a job slot or an earlier observation, or took that long to answer): whether it held within the timeout was not observed",
                kept.count + 1,
                dur_text(ended.saturating_duration_since(deadline)),
            );
            kept.push(o);
            return (CheckOutcome::Error, reason);
        }
        if o.outcome() == CheckOutcome::Pass {
            let reason = format!(
                "passed at observation {} after {}: {}",
                kept.count + 1,
                dur_text(start.elapsed()),
                o.reason()
            );
            kept.push(o);
            return (CheckOutcome::Pass, reason);
        }
        kept.push(o);
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        // The last observation starts as long before the deadline as the one before took, so
        // that a probe that takes a while to answer still answers by the deadline.
        next = (now + wait).min(deadline.checked_sub(took).unwrap_or(deadline).max(now));
        tokio::time::sleep_until(next).await;
        wait = (wait * 2).min(max_interval.std());
    }
    let (last_outcome, last_reason) = kept
        .last()
        .map_or((CheckOutcome::Error, String::new()), |o| {
            (o.outcome(), o.reason().to_owned())
        });
    let mut reason = format!(
        "did not pass within {timeout} ({} observations); last: {last_reason}",
        kept.count
    );
    // A clean failure is what the system showed; errors after it (a final hang) only say
    // the later observations could not tell, so they do not turn the failure into an error.
    let outcome = if kept.failed > 0 {
        CheckOutcome::Fail
    } else {
        last_outcome
    };
    if last_outcome == CheckOutcome::Error
        && let Some((i, f)) = &kept.last_failure
    {
        reason.push_str(&format!("; last failure (observation {}): {f}", i + 1));
    }
    if last_outcome == CheckOutcome::Fail
        && let Some((i, e)) = &kept.last_error
    {
        reason.push_str(&format!("; last error (observation {}): {e}", i + 1));
    }
    (outcome, reason)
}

/// A hold's timing.
#[derive(Clone, Copy)]
struct HoldPlan {
    window: Dur,
    interval: Dur,
    timeout: Dur,
}

async fn hold(
    ctx: &RunCtx,
    check: &Check,
    plan: HoldPlan,
    start: Instant,
    during: bool,
    kept: &mut Kept,
    first: &mut Option<oneshot::Sender<()>>,
) -> Verdict {
    let HoldPlan {
        window,
        interval,
        timeout,
    } = plan;
    let deadline = start + timeout.std();
    let planned = planned_samples(window, interval);
    let mut k: u64 = 0;
    // Whether a sample started after the agent had ended (and its leftovers were killed).
    let mut after_agent = false;
    // The last sample that finished later than the slack after it was due, and by how much.
    let mut late: Option<(u64, Duration)> = None;
    // One sample (`window: 0`) is spaced from the next only by the interval, under `--during`.
    let allowed = if window.as_millis() == 0 {
        slack(interval, interval)
    } else {
        slack(interval, window)
    };
    let window_divides = window.as_millis() % interval.as_millis().max(1) == 0;
    loop {
        let agent_running = during && !ctx.agent_done();
        // The window is over and so is the agent; but what the agent did last, past the
        // window, has not been seen unless a sample started after it ended: one more, at once.
        let last = k >= planned && !agent_running;
        if last && (!during || after_agent) {
            break;
        }
        let scheduled = if last {
            Instant::now()
        } else if k < planned {
            hold_sample_at(start, window, interval, k)
        } else {
            // Past the window (only while the agent runs): every interval on, on the grid the
            // window's samples began (the extra sample at a window's tail is not a step of it).
            let step = k.saturating_sub(u64::from(!window_divides));
            start
                + interval
                    .std()
                    .saturating_mul(u32::try_from(step).unwrap_or(u32::MAX))
        };
        if !agent_running && !last && scheduled.max(Instant::now()) > deadline {
            return (
                CheckOutcome::Error,
                format!(
                    "window cut short after {} of {planned} samples: the criterion timeout {timeout} passed",
                    kept.count
                ),
            );
        }
        if during && k >= planned && !last {
            // Past the window only the agent keeps us sampling: when it ends, the loop takes
            // the last sample at once.
            if !ctx.sleep_until_or_agent_done(scheduled).await {
                continue;
            }
        } else if !last {
            tokio::time::sleep_until(scheduled).await;
        }
        after_agent |= during && ctx.agent_done();
        let (o, _) = sample(ctx, check, true, k, scheduled).await;
        signal(first);
        let lateness = Instant::now().saturating_duration_since(scheduled);
        if lateness > allowed {
            late = Some((k, lateness));
        }
        k += 1;
        let failed = o.outcome() == CheckOutcome::Fail;
        kept.push(o);
        if failed {
            let (i, why) = kept
                .first_failure()
                .map(|f| (f.index, f.reason().to_owned()))
                .unwrap_or_default();
            // Under `--during` sampling goes on past the window while the agent runs, so a
            // violation may come after the planned count.
            let at = i.saturating_add(1);
            let place = if at > planned {
                format!(
                    "violated at sample {at} (the window plans {planned}; sampling went on while the agent ran)"
                )
            } else {
                format!("violated at sample {at} of {planned}")
            };
            return (CheckOutcome::Fail, format!("{place}: {why}"));
        }
    }
    if kept.errored > 0 {
        let (i, e) = kept.last_error.clone().unwrap_or_default();
        return (
            CheckOutcome::Error,
            format!(
                "{} of {} samples could not observe; last error (sample {}): {e}",
                kept.errored,
                kept.count,
                i + 1
            ),
        );
    }
    if let Some((i, by)) = late {
        return (
            CheckOutcome::Error,
            format!(
                "sample {} of {} ended {} after it was due (it waited for a job slot or for the sample before it, or took that long to observe): the window was not observed every {interval}, so the hold cannot be vouched for",
                i + 1,
                kept.count,
                dur_text(by)
            ),
        );
    }
    let reason = if during {
        format!(
            "held for {} samples over the window {window} and the agent's run",
            kept.count
        )
    } else {
        format!(
            "held for the window {window}: {} samples passed",
            kept.count
        )
    };
    (CheckOutcome::Pass, reason)
}

async fn unchanged(
    ctx: &RunCtx,
    check: &Check,
    kept: &mut Kept,
    changes: &mut Option<Vec<diff::Change>>,
    first: &mut Option<oneshot::Sender<()>>,
) -> Verdict {
    let (base, compared_with) = match ctx.baseline_for(check) {
        Ok(b) => {
            // Which baseline was compared with is part of what was observed, so the evidence's
            // content digest covers it: a pass against another baseline is another pass.
            let facts = serde_json::json!({
                "digest": b.digest().as_str(),
                "taken_at": b.taken_at.as_str(),
            });
            (b.snapshot, facts)
        }
        Err(e) => return (CheckOutcome::Error, e),
    };
    let (mut o, snapshot) = sample(ctx, check, false, 0, Instant::now()).await;
    o.sample.facts.insert("baseline".to_owned(), compared_with);
    signal(first);
    let ok = o.outcome() == CheckOutcome::Pass;
    let why = o.reason().to_owned();
    kept.push(o);
    let Some(current) = snapshot.filter(|_| ok) else {
        return (CheckOutcome::Error, why);
    };
    // The comparison grows with the snapshots and the ignore paths: off the async thread and
    // within the probe's timeout, like the observation itself. A comparison cut short
    // finishes on its blocking thread, unused.
    let limit = check.probe.timeout();
    let ignore = check.ignore.clone();
    let compared = tokio::time::timeout(
        limit,
        tokio::task::spawn_blocking(move || diff::changes(&base, &current, &ignore)),
    )
    .await;
    let found = match compared {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => return (CheckOutcome::Error, format!("the comparison failed: {e}")),
        Err(_) => {
            return (
                CheckOutcome::Error,
                format!(
                    "the comparison with the baseline did not finish within {}",
                    dur_text(limit)
                ),
            );
        }
    };
    let verdict = if found.is_empty() {
        (
            CheckOutcome::Pass,
            "unchanged since the baseline".to_owned(),
        )
    } else {
        let shown: Vec<&str> = found.iter().take(5).map(|c| c.path.as_str()).collect();
        let more = if found.len() > 5 {
            format!(" and {} more", found.len() - 5)
        } else {
            String::new()
        };
        (
            CheckOutcome::Fail,
            format!("{} paths changed: {}{more}", found.len(), shown.join(", ")),
        )
    };
    *changes = Some(found);
    verdict
}

fn signal(first: &mut Option<oneshot::Sender<()>>) {
    if let Some(tx) = first.take() {
        let _ = tx.send(());
    }
}

/// What a criterion stopped from outside reports: never a pass. A hold that already saw a
/// violation has returned before, so a stopped one has none.
fn stopped(plan: Plan, kept: &Kept, r: StopReason) -> Verdict {
    let why = stopped_reason(r);
    let reason = match plan {
        Plan::Hold {
            window, interval, ..
        } => {
            format!(
                "window cut short after {} of {} samples: {why}",
                kept.count,
                planned_samples(window, interval)
            )
        }
        Plan::Converge { .. } => {
            let last = kept
                .last()
                .map(|o| format!("; last observation: {}", o.reason()))
                .unwrap_or_default();
            format!("{why} after {} observations{last}", kept.count)
        }
        Plan::Assert | Plan::Unchanged => format!("{why} before the observation completed"),
    };
    (CheckOutcome::Error, reason)
}

/// Runs one criterion to its result. `offset` delays the start of a hold (so many holds do
/// not all sample on the same instant); `first` is told when the first observation is done.
pub(crate) async fn run_check(
    check: Arc<Check>,
    ctx: Arc<RunCtx>,
    offset: Duration,
    during: bool,
    mut first: Option<oneshot::Sender<()>>,
) -> CriterionResult {
    let started_at = crate::clock::now().to_string();
    let t0 = Instant::now();
    ctx.observer.event(&Event::Started { check: &check });
    let mut kept = Kept::default();
    let mut changes = None;
    let run = {
        let mode = async {
            match check.plan {
                Plan::Assert => assert(&ctx, &check, &mut kept, &mut first).await,
                Plan::Converge {
                    timeout,
                    interval,
                    max_interval,
                } => {
                    converge(
                        &ctx,
                        &check,
                        (timeout, interval, max_interval),
                        &mut kept,
                        &mut first,
                    )
                    .await
                }
                Plan::Hold {
                    window,
                    interval,
                    timeout,
                } => {
                    let plan = HoldPlan {
                        window,
                        interval,
                        timeout,
                    };
                    hold(
                        &ctx,
                        &check,
                        plan,
                        t0 + offset,
                        during,
                        &mut kept,
                        &mut first,
                    )
                    .await
                }
                Plan::Unchanged => {
                    unchanged(&ctx, &check, &mut kept, &mut changes, &mut first).await
                }
            }
        };
        tokio::select! {
            // A stop wins whenever both are ready: a criterion that finishes as the run is
            // stopped (or starts after it was) is not vouched for.
            biased;
            r = ctx.stopped() => Err(r),
            v = mode => Ok(v),
        }
    };
    drop(first);
    let (outcome, reason) = run.unwrap_or_else(|r| stopped(check.plan, &kept, r));
    let result = CriterionResult {
        id: check.id.clone(),
        description: check.description.clone(),
        role: check.role,
        weight: check.weight,
        required: check.required,
        mode: check.mode(),
        probe: check.probe_kind().to_owned(),
        outcome,
        reason,
        definition_digest: check.definition_digest.clone(),
        started_at,
        finished_at: crate::clock::now().to_string(),
        duration_ms: ms(t0.elapsed()),
        samples: kept.count,
        during,
        changes,
        observations: kept.into_vec(),
    };
    ctx.observer.event(&Event::Finished { result: &result });
    result
}
