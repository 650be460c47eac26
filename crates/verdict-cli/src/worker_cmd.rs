//! `verdict worker --role R`: a loop over `Engine::work_one`, and `verdict jobs` to enqueue a
//! request's jobs and list the queue. The worker claims one job of its role at a time, does it
//! as the principal whose token is given, and finishes it with the claim's fencing token; on
//! SIGTERM or Ctrl-C it finishes the job in hand and stops.

use crate::lifecycle_cmd::{Common, Ctx};
use crate::remote::segment;
use anyhow::{Context as _, Result, bail};
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use verdict_core::contracts::Subject;
use verdict_core::digest::Digest;
use verdict_engine::{
    CheckDefinitions, ClassSource, DEFAULT_BACK_OFF, EngineError, ProbeChecks, VerifierKit,
    VerifyInputs, WorkOptions, Worked, WorkerRole,
};
use verdict_judge::config::{ResolvedClass, VerifiersFile};
use verdict_probes::duration::Dur;
use verdict_probes::load;
use verdict_server::jobs::{JobOut, JobPage, NewJobs};
use verdict_store::{Job, JobFilter, JobState, Location, StoreError};

const HELP: &str = "\
Roles: `runner` (a runner principal) runs the checks each subject pins, from the definitions
of --checks SPEC|DIR whose digests it pins, against the live system and files their evidence
(a subject pinning a definition not given is refused and its checks job given up); `verifier` (a verifier principal) runs one model verifier class of a
request with --verifiers FILE, reading the objective and resources a subject pins from
--content DIR (each file named by the hex of its raw SHA-256); `gate` (an operator principal)
runs the Gate once every other job of the request is finished or its deadline passed.

Each job is claimed under a lease (--lease-seconds), renewed every third of it while the job
runs; a worker that stops renewing (killed, paused, cut off) loses the job to the next worker
once the lease lapses, and its late completion is refused. A failed attempt is retried after a
back-off, up to 5 attempts. A worker whose database connection fails keeps trying. One line per job: done|failed|lost, kind, id, request, class,
outcome.

While the database is away (unreachable, restarting, its connections cut) the worker does not
exit: it logs each failed attempt to standard error and tries again, waiting a little longer
each time (up to 10 seconds); a job it held comes back to it or to another worker once its
lease lapses. With --give-up-after DURATION it exits instead once the database has been away
that long (counted from the first failure, or from the start for a worker that never reached
it), naming the database's error.

Exit status: with --once, 0 when the job was done or none was ready, 1 when it failed or was
lost; without it, 0 after SIGTERM or Ctrl-C; 2 on bad input or a refusal; 3 when the database
stayed away longer than --give-up-after.

Examples:
  VERDICT_TOKEN=$OPS verdict jobs enqueue sha256:... --deadline-seconds 3600
  VERDICT_TOKEN=$CI verdict worker --role runner --checks checks.yaml
  VERDICT_TOKEN=$REVIEWER verdict worker --role verifier --verifiers verifiers.yaml --content blobs
  VERDICT_TOKEN=$OPS verdict worker --role gate";

/// `--role`.
#[derive(clap::ValueEnum, Clone, Copy)]
pub enum RoleArg {
    /// Run checks (a runner principal).
    Runner,
    /// Run model verifier classes (a verifier principal).
    Verifier,
    /// Run the Gate (an operator principal).
    Gate,
}

/// Arguments of `verdict worker`.
#[derive(clap::Args)]
#[command(after_help = HELP)]
pub struct Args {
    /// Which jobs to work.
    #[arg(long, value_enum)]
    role: RoleArg,
    /// Work at most one job, then exit.
    #[arg(long)]
    once: bool,
    /// The lease taken with each claim, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    lease_seconds: u64,
    /// The longest wait before looking again when no job is ready, in milliseconds; a job made
    /// ready ends the wait sooner (a notification on PostgreSQL, a commit seen on SQLite).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    poll_ms: u64,
    /// Verifier role: the verifiers file (JSON or YAML).
    #[arg(long)]
    verifiers: Option<PathBuf>,
    /// Verifier role: the directory of subject content, each file named by the hex of its raw
    /// SHA-256.
    #[arg(long, value_name = "DIR")]
    content: Option<PathBuf>,
    /// Runner role: check definitions, a spec file or a directory of spec files (repeatable).
    /// Each subject's checks are run from the definition whose digest it pins; a subject
    /// pinning one not given here is refused and its checks job given up.
    #[arg(long, value_name = "SPEC|DIR")]
    checks: Vec<PathBuf>,
    /// Runner role: a spec variable, NAME=VALUE.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
    /// Exit (status 3) once the database has been away this long (`90s`, `10m`), naming its
    /// error; without it the worker waits for the database however long it takes.
    #[arg(long, value_name = "DURATION")]
    give_up_after: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// `verdict jobs`.
#[derive(clap::Subcommand)]
pub enum JobsCommand {
    /// Enqueue a request's jobs: its checks, one per verifier class, and the gate (an operator
    /// or the subject's producer). Enqueuing again adds nothing.
    #[command(after_help = "Example:\n  verdict jobs enqueue sha256:... --deadline-seconds 3600")]
    Enqueue {
        /// The verification request's digest.
        request: String,
        /// Past this many seconds the gate job runs whatever the other jobs are doing.
        #[arg(long)]
        deadline_seconds: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// List the queue (operators): one line per job (id, kind, state, attempts, fencing token,
    /// request, class, outcome or last error).
    #[command(after_help = "Example:\n  verdict jobs list --state running")]
    List {
        /// Only the jobs of this request.
        #[arg(long)]
        request: Option<String>,
        /// Only jobs in this state (ready, running, done, failed).
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        common: Common,
    },
}

/// Runs `verdict worker`.
pub fn run(args: &Args) -> Result<ExitCode> {
    install_logs()?;
    crate::lifecycle_cmd::runtime()?.block_on(work(args))
}

/// Where the worker's own log lines go (`tracing` target), kept apart from the job lines on
/// standard output.
const LOG: &str = "verdict::worker";

/// Logs to standard error: the worker's own lines from `info` up, everything else (the
/// store's drivers) from `warn` up.
fn install_logs() -> Result<()> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target(LOG, tracing::Level::INFO)
        .with_default(tracing::Level::WARN);
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(false);
    tracing_subscriber::registry()
        .with(filter)
        .with(layer)
        .try_init()
        .map_err(|e| anyhow::anyhow!("installing the logger: {e}"))
}

/// Runs `verdict jobs`.
pub fn run_jobs(cmd: JobsCommand) -> Result<ExitCode> {
    crate::lifecycle_cmd::runtime()?.block_on(jobs(cmd))
}

fn digest(text: &str) -> Result<Digest> {
    text.parse().map_err(|e| anyhow::anyhow!("{text:?}: {e}"))
}

pub(crate) fn line(job: &JobOut) -> String {
    let class = if job.class.is_empty() {
        "-"
    } else {
        &job.class
    };
    // Written by whoever ended the job, so shown with every control character escaped: no
    // line of it can clear the screen or pass for another line of this listing.
    let note = verdict_judge::sanitize::storable(
        job.outcome
            .as_deref()
            .or(job.last_error.as_deref())
            .unwrap_or(""),
    );
    format!(
        "{} {} {} attempts={} fencing={} {} {class} {note}",
        job.id, job.kind, job.state, job.attempts, job.fencing, job.request
    )
    .trim_end()
    .to_owned()
}

async fn jobs(cmd: JobsCommand) -> Result<ExitCode> {
    let jobs: Vec<JobOut> = match cmd {
        JobsCommand::Enqueue {
            request,
            deadline_seconds,
            common,
        } => {
            let request = digest(&request)?;
            if let Some(remote) = crate::remote::client(&common)? {
                let page: JobPage = remote
                    .post(
                        &format!("v1/requests/{}/jobs", segment(request.as_str())),
                        &NewJobs { deadline_seconds },
                    )
                    .await?;
                page.items
            } else {
                let ctx = Ctx::open(&common).await?;
                let caller = ctx.caller().await?;
                ctx.engine
                    .enqueue_request_jobs(
                        &caller,
                        &request,
                        deadline_seconds.map(Duration::from_secs),
                    )
                    .await?
                    .into_iter()
                    .map(Into::into)
                    .collect()
            }
        }
        JobsCommand::List {
            request,
            state,
            common,
        } => {
            let filter = JobFilter {
                request: request.as_deref().map(digest).transpose()?,
                kind: None,
                state: state.as_deref().map(str::parse::<JobState>).transpose()?,
            };
            if let Some(remote) = crate::remote::client(&common)? {
                let mut query = Vec::new();
                if let Some(r) = &filter.request {
                    query.push(format!("request={}", segment(r.as_str())));
                }
                if let Some(s) = filter.state {
                    query.push(format!("state={}", s.as_str()));
                }
                let path = if query.is_empty() {
                    "v1/jobs".to_owned()
                } else {
                    format!("v1/jobs?{}", query.join("&"))
                };
                remote.get_all(&path).await?
            } else {
                let ctx = Ctx::open(&common).await?;
                let caller = ctx.caller().await?;
                ctx.engine
                    .jobs(&caller, &filter)
                    .await?
                    .into_iter()
                    .map(Into::into)
                    .collect()
            }
        }
    };
    for j in &jobs {
        outln!("{}", line(j))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The verifier classes of a verifiers file, templates relative to it.
struct Classes {
    file: VerifiersFile,
    base: PathBuf,
}

impl ClassSource for Classes {
    fn resolve(&self, name: &str) -> std::result::Result<ResolvedClass, String> {
        self.file.class(name, &self.base).map_err(|e| e.to_string())
    }
}

/// Subject content from a directory of files named by their digest's hex.
struct Verifier {
    classes: Classes,
    content: PathBuf,
}

impl Verifier {
    async fn blob(&self, what: &str, digest: &Digest) -> std::result::Result<Vec<u8>, String> {
        let hex = digest.as_str().rsplit(':').next().unwrap_or_default();
        let path = self.content.join(hex);
        tokio::fs::read(&path)
            .await
            .map_err(|e| format!("{what} {digest}: {}: {e}", path.display()))
    }
}

#[async_trait]
impl VerifierKit for Verifier {
    async fn inputs(&self, subject: &Subject) -> std::result::Result<VerifyInputs, String> {
        let objective = self.blob("objective", &subject.objective.digest).await?;
        let mut resources = Vec::new();
        for r in &subject.resources {
            let bytes = self
                .blob(&format!("resource {}", r.name), &r.digest)
                .await?;
            resources.push((r.name.to_string(), bytes));
        }
        Ok(VerifyInputs {
            objective,
            resources,
        })
    }

    fn classes(&self) -> &dyn ClassSource {
        &self.classes
    }
}

/// The check specs of `--checks`: each a spec file, or a directory whose `.yaml`, `.yml` and
/// `.json` files are specs, all loaded with the `--var` values.
fn load_definitions(paths: &[PathBuf], vars: &[String]) -> Result<CheckDefinitions> {
    let vars = crate::check_cmd::parse_vars(vars)?;
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("{}: cannot list the directory", path.display()))?
                .map(|e| e.map(|e| e.path()))
                .collect::<std::io::Result<_>>()
                .with_context(|| format!("{}: cannot list the directory", path.display()))?;
            found.retain(|p| {
                p.is_file()
                    && p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
            });
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    let mut specs = Vec::with_capacity(files.len());
    for file in &files {
        specs.push(
            load::load_file(file, &vars).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?,
        );
    }
    let definitions = CheckDefinitions::new(specs);
    if definitions.is_empty() {
        bail!("--checks gave no check definitions");
    }
    Ok(definitions)
}

fn options(args: &Args) -> Result<(WorkerRole, WorkOptions)> {
    // The label a claim records: the host's name (its first 200 characters; the store takes a
    // label of at most 256) and the process.
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "worker".into());
    let holder = format!(
        "{}-{}",
        host.chars().take(200).collect::<String>(),
        std::process::id()
    );
    let mut o = WorkOptions {
        holder,
        lease: Duration::from_secs(args.lease_seconds),
        verifier: None,
        checks: None,
        back_off: DEFAULT_BACK_OFF,
    };
    let role = match args.role {
        RoleArg::Runner => {
            if args.checks.is_empty() {
                bail!("--role runner needs --checks SPEC|DIR");
            }
            let definitions = load_definitions(&args.checks, &args.vars)?;
            o.checks = Some(Arc::new(ProbeChecks::new(definitions)));
            WorkerRole::Runner
        }
        RoleArg::Verifier => {
            let (Some(file), Some(content)) = (&args.verifiers, &args.content) else {
                bail!("--role verifier needs --verifiers FILE and --content DIR");
            };
            let base = file.parent().unwrap_or_else(|| Path::new(".")).to_owned();
            let file = VerifiersFile::load(file)?;
            o.verifier = Some(Arc::new(Verifier {
                classes: Classes { file, base },
                content: content.clone(),
            }));
            WorkerRole::Verifier
        }
        RoleArg::Gate => WorkerRole::Gate,
    };
    Ok((role, o))
}

/// Whether `e` (opening the store, authenticating) is the database being away, by the
/// engine's one test of it ([`EngineError::is_unavailable`], [`StoreError::is_unavailable`]).
fn database_away(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<EngineError>()
            .is_some_and(EngineError::is_unavailable)
            || c.downcast_ref::<StoreError>()
                .is_some_and(StoreError::is_unavailable)
    })
}

/// The pause after the first failed attempt to reach the database, doubled after each further
/// one up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(250);

/// The longest pause between attempts to reach the database.
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// The database being away, as the worker waits it out: when it was first found away, how
/// many attempts failed since, and how long the worker may wait (`--give-up-after`).
struct Outage {
    give_up: Option<Duration>,
    since: Option<tokio::time::Instant>,
    failed: u32,
}

impl Outage {
    fn new(give_up: Option<Duration>) -> Self {
        Self {
            give_up,
            since: None,
            failed: 0,
        }
    }

    /// Counts the outage from `at`, unless it is already being counted.
    fn begin(&mut self, at: tokio::time::Instant) {
        self.since.get_or_insert(at);
    }

    fn away(&self) -> bool {
        self.since.is_some()
    }

    /// How long an attempt may take before the worker gives up (`None`: as long as it takes).
    fn left(&self) -> Option<Duration> {
        let since = self.since?;
        Some(self.give_up?.saturating_sub(since.elapsed()))
    }

    /// Records a failed attempt: the pause before the next, or, once the database has been
    /// away longer than `--give-up-after`, the message to give up with.
    fn failed(&mut self, error: &str) -> std::result::Result<Duration, String> {
        let since = *self.since.get_or_insert_with(tokio::time::Instant::now);
        self.failed = self.failed.saturating_add(1);
        let away_for = since.elapsed();
        if let Some(give_up) = self.give_up
            && away_for >= give_up
        {
            return Err(format!(
                "giving up: the database has been unavailable for {:.1}s, past --give-up-after ({:.1}s), after {} failed attempts; last error: {error}",
                away_for.as_secs_f64(),
                give_up.as_secs_f64(),
                self.failed
            ));
        }
        let exp = self.failed.saturating_sub(1).min(10);
        let mut pause = FIRST_PAUSE.saturating_mul(1 << exp).min(MAX_PAUSE);
        if let Some(left) = self.left() {
            pause = pause.min(left);
        }
        tracing::warn!(
            target: LOG,
            attempt = self.failed,
            away_for = format!("{:.1}s", away_for.as_secs_f64()),
            retry_in = format!("{:.1}s", pause.as_secs_f64()),
            error,
            "the database is unavailable; trying again"
        );
        Ok(pause)
    }

    /// The database answered again.
    fn recovered(&mut self) {
        if let Some(since) = self.since.take()
            && self.failed > 0
        {
            tracing::info!(
                target: LOG,
                failed_attempts = self.failed,
                away_for = format!("{:.1}s", since.elapsed().as_secs_f64()),
                "the database is back"
            );
        }
        self.failed = 0;
    }
}

/// `attempt`, cut short after `limit` when there is one: `None` then.
async fn within<T>(limit: Option<Duration>, attempt: impl Future<Output = T>) -> Option<T> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, attempt).await.ok(),
        None => Some(attempt.await),
    }
}

/// What a worker waiting for the database at `store` says when an attempt is cut short.
fn no_answer(store: &str, limit: Option<Duration>) -> String {
    format!(
        "no answer from the database at {store} within {:.1}s",
        limit.unwrap_or_default().as_secs_f64()
    )
}

/// Gives up waiting for the database: the message on standard error, exit status 3.
fn give_up(why: &str) -> ExitCode {
    eprintln!("verdict: worker: {why}");
    ExitCode::from(3)
}

/// Sleeps `pause`, or less when the worker is told to stop.
async fn pause_for(pause: Duration, wake: &tokio::sync::Notify) {
    tokio::select! {
        () = tokio::time::sleep(pause) => {}
        () = wake.notified() => {}
    }
}

fn kind_and_job(w: &Worked) -> Option<(&'static str, &Job)> {
    match w {
        Worked::Idle => None,
        Worked::Done(j) => Some(("done", j)),
        Worked::Failed { job, .. } => Some(("failed", job)),
        Worked::Lost { job } => Some(("lost", job)),
    }
}

async fn work(args: &Args) -> Result<ExitCode> {
    crate::remote::refuse_remote(
        &args.common,
        "a worker claims, renews and finishes its jobs in the store itself, and no route does that yet",
    )?;
    let (role, options) = options(args)?;
    if matches!(role, WorkerRole::Runner) {
        // A runner runs producers' programs, and a program that detaches from its process
        // group (setsid) before it exits would live on, able to change what the next check
        // observes: this process adopts such orphans and each run of checks kills them. Every
        // child of a runner worker is started by the probes' runner, so no other is taken for
        // an orphan.
        if let Err(e) = verdict_probes::process::adopt_orphans() {
            eprintln!(
                "verdict worker: warning: cannot adopt orphaned processes ({e}); a program that detaches from its process group may outlive its check"
            );
        }
    }
    let give_up_after = args
        .give_up_after
        .as_deref()
        .map(|d| {
            Dur::parse(d)
                .map(Dur::std)
                .map_err(|e| anyhow::anyhow!("--give-up-after: {e}"))
        })
        .transpose()?;
    let stop = Arc::new(AtomicBool::new(false));
    let wake = Arc::new(tokio::sync::Notify::new());
    {
        let (stop, wake) = (stop.clone(), wake.clone());
        // Listening before the first claim: a SIGTERM from then on never ends a job midway.
        #[cfg(unix)]
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("cannot listen for SIGTERM")?;
        tokio::spawn(async move {
            #[cfg(unix)]
            let term = async move {
                term.recv().await;
            };
            #[cfg(not(unix))]
            let term = std::future::pending::<()>();
            tokio::select! {
                () = term => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            stop.store(true, Ordering::SeqCst);
            wake.notify_one();
        });
    }
    // A worker started while the database is away (restarting, its connections cut, not up
    // yet) waits for it as the loop below does, counting from its start; anything else ends it
    // at once.
    // Where the store is, for the messages (credentials removed); a location that cannot be
    // understood is refused when the store is opened.
    let store = Location::resolve(args.common.store.as_deref())
        .map_or_else(|_| "the store".to_owned(), |l| l.redacted());
    let mut outage = Outage::new(give_up_after);
    outage.begin(tokio::time::Instant::now());
    let (ctx, caller) = loop {
        let limit = outage.left();
        let attempt = within(limit, async {
            let ctx = Ctx::open(&args.common).await?;
            let caller = ctx.caller().await?;
            anyhow::Ok((ctx, caller))
        })
        .await;
        let why = match attempt {
            Some(Ok(started)) => break started,
            Some(Err(e)) if database_away(&e) => format!("{e:#}"),
            Some(Err(e)) => return Err(e),
            None => no_answer(&store, limit),
        };
        match outage.failed(&why) {
            Ok(pause) => pause_for(pause, &wake).await,
            Err(why) => return Ok(give_up(&why)),
        }
        if stop.load(Ordering::SeqCst) {
            return Ok(ExitCode::SUCCESS);
        }
    };
    outage.recovered();
    let poll = Duration::from_millis(args.poll_ms);
    while !stop.load(Ordering::SeqCst) {
        // While the database is away, a read (the caller's token again, bounded by what is
        // left of --give-up-after) rather than a claim tells when it is back.
        if outage.away() {
            let limit = outage.left();
            let why = match within(limit, ctx.caller()).await {
                Some(Ok(_)) => {
                    outage.recovered();
                    continue;
                }
                Some(Err(e)) if database_away(&e) => format!("{e:#}"),
                Some(Err(e)) => return Err(e),
                None => no_answer(&store, limit),
            };
            match outage.failed(&why) {
                Ok(pause) => pause_for(pause, &wake).await,
                Err(why) => return Ok(give_up(&why)),
            }
            continue;
        }
        // The job in hand is finished before a stop is looked at again.
        let worked = match ctx.engine.work_one(&caller, role, &options).await {
            Ok(worked) => worked,
            // The database went away (restarted, the connection cut): the pool opens new
            // connections, so the worker waits and claims again; a job it held comes back
            // to it or to another worker once its lease lapses.
            Err(e) if e.is_unavailable() && !args.once => {
                outage.begin(tokio::time::Instant::now());
                match outage.failed(&e.to_string()) {
                    Ok(pause) => pause_for(pause, &wake).await,
                    Err(why) => return Ok(give_up(&why)),
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if let Some((what, job)) = kind_and_job(&worked) {
            let why = match &worked {
                Worked::Failed { why, .. } => format!(" ({why})"),
                _ => String::new(),
            };
            outln!("{what} {}{why}", line(&JobOut::from(job.clone())))?;
        }
        if args.once {
            return Ok(match worked {
                Worked::Idle | Worked::Done(_) => ExitCode::SUCCESS,
                Worked::Failed { .. } | Worked::Lost { .. } => ExitCode::from(1),
            });
        }
        if worked == Worked::Idle {
            // Until a job of the role may be ready (a notification on PostgreSQL, a commit
            // seen on SQLite), at most the poll interval; only a hint, the next claim decides.
            let waited = async {
                if let Err(e) = ctx.engine.wait_for_jobs(&caller, role, poll).await {
                    eprintln!("worker: {e}; trying again");
                    tokio::time::sleep(poll).await;
                }
            };
            tokio::select! {
                () = waited => {}
                () = wake.notified() => {}
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    /// A job's outcome is written by whoever ended the job (on PostgreSQL, by hand through a
    /// worker's own login): its listing shows the text with every control character escaped, so
    /// it can neither clear the operator's screen nor add a line of its own.
    #[test]
    fn a_jobs_line_shows_its_outcome_with_controls_escaped() {
        let job = JobOut {
            id: 7,
            kind: "checks".into(),
            request: verdict_core::digest::Digest::from_sha256(&[1; 32]),
            class: String::new(),
            state: "done".into(),
            attempts: 1,
            holder: Some("h".into()),
            principal: Some("ci".into()),
            lease_until: None,
            fencing: 1,
            not_before: None,
            deadline_at: None,
            outcome: Some("\u{1b}[2J PASS\n8 checks done attempts=9".into()),
            last_error: None,
            enqueued_by: "coder".into(),
            created_at: "2026-12-01T00:00:00Z".into(),
            done_at: None,
        };
        let shown = line(&job);
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert!(
            shown.ends_with("[U+001B][2J PASS[U+000A]8 checks done attempts=9"),
            "{shown}"
        );
    }
}
