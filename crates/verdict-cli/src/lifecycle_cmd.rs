//! The verification lifecycle over a store: `init`, `principal`, `grant`, `policy`, `subject`,
//! `evidence`, `request`, `run`, `result`, `decide`, `status`, `history`, `quickstart`, and
//! `gate run` / `gate replay`. Every command acts as the principal whose token it is given.

use crate::input;
use crate::remote::segment;
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::process::ExitCode;
use verdict_core::contracts::{HumanVerdict, Role, Timestamp};
use verdict_core::digest::Digest;
use verdict_engine::{DecisionView, Engine, Principal, Reviewed};
use verdict_server::admin::{
    AccessName, GatePolicy, GrantOut, NewGrant, NewPrincipal, PrincipalCreated, PrincipalOut,
    Reason, RoleName, ScopeName, TokenChange,
};
use verdict_server::jobs::NewJobs;
use verdict_server::routes::{
    EvidenceBatch, EvidenceStored, GateRunOutcome, NewHumanDecision, NewRequest, RequestStored,
    Stored, Verdict,
};
use verdict_server::work::{Admitted, NewRun, SubmittedOut};
use verdict_store::{Access, Location, ScopeKind, StoreClock};

/// Options every lifecycle command takes.
#[derive(clap::Args, Clone)]
pub struct Common {
    /// The caller's token (shown once by `init` or `principal add`). Reads need one as writes
    /// do: an operator reads everything, anyone else what its grants in force cover. A token on
    /// the command line is visible to every local user (`ps`, `/proc/PID/cmdline`): prefer
    /// `--token-file` or `VERDICT_TOKEN`.
    #[arg(long, env = "VERDICT_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// A file holding the caller's token (one line), instead of `--token`, so the token is in
    /// no command line.
    #[arg(long, conflicts_with = "token")]
    pub(crate) token_file: Option<std::path::PathBuf>,
    /// The store: `sqlite:PATH` or `postgres://...` (default `$VERDICT_HOME/verdict.db`, else
    /// `./.verdict/verdict.db`).
    #[arg(long, env = "VERDICT_STORE", hide_env_values = true)]
    pub(crate) store: Option<String>,
    /// A running `verdict serve` to send the command to (`http://HOST:PORT`), instead of
    /// opening the store here; the token goes as a bearer. The server's store and gate are
    /// used, so neither `--store` nor `--now` goes with it. Commands that need the store here
    /// (init, quickstart, worker, ...) refuse it.
    #[arg(long, env = "VERDICT_SERVER", hide_env_values = true)]
    pub(crate) server: Option<String>,
    /// The gate whose policy decides.
    #[arg(long, default_value = verdict_engine::DEFAULT_GATE)]
    pub(crate) gate: String,
    /// The time to act at (RFC 3339 UTC), only for a store initialised with `--clock manual`;
    /// a store on the system clock refuses it and takes every time from its own clock.
    #[arg(long)]
    pub(crate) now: Option<String>,
}

impl Common {
    /// `--now`, read.
    fn read_now(&self) -> Result<Option<Timestamp>> {
        self.now
            .as_deref()
            .map(|text| {
                text.parse()
                    .map_err(|e| anyhow::anyhow!("--now {text:?}: {e}"))
            })
            .transpose()
    }

    /// The caller's token: `--token-file`'s first line, else `--token` / `VERDICT_TOKEN`.
    pub(crate) fn token(&self) -> Result<Option<String>> {
        let Some(path) = &self.token_file else {
            return Ok(self.token.clone());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--token-file {}", path.display()))?;
        let token = text.lines().next().unwrap_or_default().trim();
        if token.is_empty() {
            bail!("--token-file {}: the file holds no token", path.display());
        }
        Ok(Some(token.to_owned()))
    }
}

const EXAMPLES: &str = "Examples:
  verdict init                                   # prints the operator's token once
  export VERDICT_TOKEN=vdt_...
  verdict principal add ci --role runner
  verdict grant add g-ci --principal ci --execution ex-1 --access write --expires 2027-01-01T00:00:00Z
  verdict policy set policy.json
  verdict subject put subject.json               # as the producer
  verdict evidence add evidence.json             # as the runner (from verdict check --evidence-out)
  verdict request create ex-1
  verdict run admit sha256:... --verifier rev --class reviewer --run run-1
  verdict result submit result.json              # as the verifier
  verdict decide ex-1 --subject sha256:... --policy sha256:... --approve --reason \"reviewed the migration\"
  verdict gate run ex-1 && verdict status ex-1 && verdict history ex-1
  verdict execution cancel ex-1 --reason \"superseded\"";

/// `init --clock`.
#[derive(clap::ValueEnum, Clone, Copy)]
pub enum ClockArg {
    /// The system clock (on PostgreSQL, the database's).
    System,
    /// A manual clock: every command gives the time with `--now`.
    Manual,
}

impl From<ClockArg> for StoreClock {
    fn from(c: ClockArg) -> Self {
        match c {
            ClockArg::System => Self::System,
            ClockArg::Manual => Self::Manual,
        }
    }
}

/// Lifecycle commands (flattened into the top level).
#[derive(clap::Subcommand)]
pub enum LifecycleCommand {
    /// Create the store and its first operator; prints the operator's token once.
    #[command(after_help = EXAMPLES)]
    Init {
        /// The operator's name: ASCII letters, digits, `.`, `_`, `-`, `@` and `+`.
        #[arg(long, default_value = "operator")]
        operator: String,
        /// The store's clock, chosen once, here: `system` (the store's own clock decides every
        /// time) or `manual` (tests and simulations: each command sets the time with `--now`).
        #[arg(long, value_enum, default_value = "system")]
        clock: ClockArg,
        #[command(flatten)]
        common: Common,
    },
    /// Manage principals (operator only).
    #[command(
        subcommand,
        after_help = "Example:\n  verdict principal add rev --role verifier"
    )]
    Principal(PrincipalCommand),
    /// Grant or revoke access to executions or missions (operator only).
    #[command(
        subcommand,
        after_help = "Example:\n  verdict grant add g-rev --principal rev --execution ex-1 --access read --expires 2027-01-01T00:00:00Z"
    )]
    Grant(GrantCommand),
    /// Set the gate's policy (operator only).
    #[command(
        subcommand,
        after_help = "Example:\n  verdict policy set policy.json --gate merge"
    )]
    Policy(PolicyCommand),
    /// Put a subject for its execution (producer).
    #[command(
        subcommand,
        after_help = "Example:\n  verdict subject put subject.json"
    )]
    Subject(SubjectCommand),
    /// Append check evidence (runner; producer evidence counts only where policy says).
    #[command(subcommand, after_help = "Example:\n  verdict evidence add ev.json")]
    Evidence(EvidenceCommand),
    /// Create a verification request for an execution's current subject.
    #[command(
        subcommand,
        after_help = "Example:\n  verdict request create ex-1 --budget '{\"max_runs\": 2}'"
    )]
    Request(RequestCommand),
    /// Admit a verifier to a run (operator); runs preflight. Cancel a run (operator).
    #[command(
        subcommand,
        after_help = "Examples:\n  verdict run admit sha256:... --verifier rev --class reviewer --run run-1\n  verdict run cancel run-1 --reason \"provider outage\""
    )]
    Run(RunCommand),
    /// Submit a verification result for an admitted run (verifier).
    #[command(
        subcommand,
        after_help = "Example:\n  verdict result submit result.json"
    )]
    Result(ResultCommand),
    /// Approve or reject the subject and policy reviewed (human, never the producer).
    #[command(
        group = clap::ArgGroup::new("verdict").required(true).multiple(false),
        after_help = "Example:\n  verdict status ex-1      # shows the current subject and policy digests\n  verdict decide ex-1 --subject sha256:... --policy sha256:... --reject --reason \"the migration drops a column still read\"\n  verdict decide ex-1 --subject sha256:... --policy sha256:... --reviewed-decision sha256:... --approve --reason \"risk reviewed\"\n\nIf either digest is no longer current, the decision is refused and nothing is recorded.\nAn approval clears exactly the human_required reasons of the current evaluation, and is refused when there are none; with --reviewed-decision, it is refused unless that evaluation is still the current one."
    )]
    Decide {
        /// Execution id.
        execution: String,
        /// The digest of the subject reviewed (as `status` shows it).
        #[arg(long)]
        subject: String,
        /// The digest of the policy reviewed under (as `status` shows it).
        #[arg(long)]
        policy: String,
        /// Approve.
        #[arg(long, group = "verdict")]
        approve: bool,
        /// Reject.
        #[arg(long, group = "verdict")]
        reject: bool,
        /// Why (required).
        #[arg(long)]
        reason: String,
        /// The evaluation key of the gate decision reviewed (as `status` and `gate run` show
        /// it): refused unless it is still the current evaluation.
        #[arg(long, value_name = "KEY")]
        reviewed_decision: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Show an execution's current applicable decision, or why none applies.
    #[command(
        after_help = "Example:\n  verdict status ex-1 --json\n\nAn operator reads any execution; anyone else one its grants in force cover.\nExit status: 0 when a pass applies, 1 otherwise; 2 when refused (no token, a wrong one, no grant) or when no subject was put for the execution (not_found)."
    )]
    Status {
        /// Execution id.
        execution: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Every decision and run of an execution, with its applicability.
    #[command(after_help = "Example:\n  verdict history ex-1 --json")]
    History {
        /// Execution id.
        execution: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Walk one real change through the whole flow in the embedded store (no network, no key).
    #[command(
        after_help = "Example:\n  verdict quickstart && verdict status quickstart-1 --gate quickstart\n\nIt uses $VERDICT_HOME (default ./.verdict) and touches nothing else. On an empty store it initialises it and shows the operator's token once; run again with that token (--token or VERDICT_TOKEN), it starts a new execution."
    )]
    Quickstart {
        /// The store: `sqlite:PATH` or `postgres://...` (default `$VERDICT_HOME/verdict.db`,
        /// else `./.verdict/verdict.db`). The quickstart makes its own principals and gate, so
        /// it takes no gate or time.
        #[arg(long, env = "VERDICT_STORE", hide_env_values = true)]
        store: Option<String>,
        /// An operator's token, needed on a store that is already initialised (only an
        /// operator adds principals); an empty store is initialised and its token shown once.
        #[arg(long, env = "VERDICT_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Refused: the quickstart runs where the store is, never through a server.
        #[arg(long, env = "VERDICT_SERVER", hide_env_values = true, hide = true)]
        server: Option<String>,
    },
}

/// `principal ...`.
#[derive(clap::Subcommand)]
pub enum PrincipalCommand {
    /// Add a principal; prints its token once.
    #[command(
        after_help = "Examples:\n  verdict principal add rev --role verifier\n  verdict principal add coder --role producer --db-login"
    )]
    Add {
        /// Name: ASCII letters, digits, `.`, `_`, `-`, `@` and `+`, so that no name can pass for
        /// another.
        name: String,
        /// Role.
        #[arg(long, value_parser = ["producer", "runner", "verifier", "human", "operator"])]
        role: String,
        /// PostgreSQL: also give the principal a database login of its own and print its
        /// connection URL once (user and password included); with it the principal can do
        /// only what it may.
        #[arg(long)]
        db_login: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Revoke or replace a principal's token.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Give a principal's own PostgreSQL login again, or take it back.
    #[command(subcommand)]
    Login(LoginCommand),
    #[command(flatten)]
    Browse(crate::browse_cmd::PrincipalBrowse),
}

/// `principal token ...`.
#[derive(clap::Subcommand)]
pub enum TokenCommand {
    /// Revoke a principal's token (operator only): from now on it authenticates nobody. Its
    /// grants stay; `rotate` by an operator gives it a token again.
    #[command(
        after_help = "Example:\n  verdict principal token revoke ci --reason \"laptop lost\""
    )]
    Revoke {
        /// The principal.
        name: String,
        /// Why.
        #[arg(long, default_value = "")]
        reason: String,
        #[command(flatten)]
        common: Common,
    },
    /// Replace a principal's token with a new one, printed once; the old one stops working at
    /// once. An operator for anyone, any other principal for itself only.
    #[command(after_help = "Example:\n  verdict principal token rotate ci")]
    Rotate {
        /// The principal.
        name: String,
        /// Why.
        #[arg(long, default_value = "")]
        reason: String,
        #[command(flatten)]
        common: Common,
    },
}

/// `principal login ...` (PostgreSQL; operators only, where the store is).
#[derive(clap::Subcommand)]
pub enum LoginCommand {
    /// Give a principal its own database login, or give it again: a fresh password, and the
    /// connection URL printed once. A login in use is first taken back and every session
    /// opened with it ended; if one cannot be ended, the login stays taken back and this fails
    /// (run it again once the session is gone).
    #[command(after_help = "Example:\n  verdict principal login give ci")]
    Give {
        /// The principal.
        name: String,
        #[command(flatten)]
        common: Common,
    },
    /// Take a principal's database login back: it no longer logs in, and every session it has
    /// open is ended. Its token, grants and acts stay; `give` restores the login. Exits 1 if a
    /// session could not be ended.
    #[command(after_help = "Example:\n  verdict principal login revoke ci")]
    Revoke {
        /// The principal.
        name: String,
        #[command(flatten)]
        common: Common,
    },
}

/// `grant ...`.
#[derive(clap::Subcommand)]
pub enum GrantCommand {
    /// Grant a principal access to one execution or mission until a time.
    #[command(
        after_help = "Example:\n  verdict grant add g-rev --principal rev --execution ex-1 --access read --expires 2027-01-01T00:00:00Z"
    )]
    Add {
        /// Grant id.
        id: String,
        /// The principal.
        #[arg(long)]
        principal: String,
        /// The execution covered.
        #[arg(long, conflicts_with = "mission", required_unless_present = "mission")]
        execution: Option<String>,
        /// The mission covered.
        #[arg(long)]
        mission: Option<String>,
        /// read or write.
        #[arg(long, value_parser = ["read", "write"])]
        access: String,
        /// When it lapses (RFC 3339 UTC).
        #[arg(long)]
        expires: String,
        #[command(flatten)]
        common: Common,
    },
    /// Revoke a grant, with immediate effect.
    #[command(after_help = "Example:\n  verdict grant revoke g-rev --reason \"rotated out\"")]
    Revoke {
        /// Grant id.
        id: String,
        /// Why.
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        common: Common,
    },
    #[command(flatten)]
    Browse(crate::browse_cmd::GrantBrowse),
}

/// `policy ...`.
#[derive(clap::Subcommand)]
pub enum PolicyCommand {
    /// Store a policy and make it the gate's current one.
    #[command(after_help = "Example:\n  verdict policy set policy.json --gate merge")]
    Set {
        /// Policy file (JSON), or `-`.
        file: String,
        #[command(flatten)]
        common: Common,
    },
    #[command(flatten)]
    Browse(crate::browse_cmd::PolicyBrowse),
}

/// `subject ...`.
#[derive(clap::Subcommand)]
pub enum SubjectCommand {
    /// Put a subject and make it its execution's current one.
    #[command(after_help = "Example:\n  verdict subject put subject.json")]
    Put {
        /// Subject file (JSON), or `-`.
        file: String,
        #[command(flatten)]
        common: Common,
    },
    #[command(flatten)]
    Scaffold(crate::scaffold_cmd::SubjectScaffold),
}

/// `evidence ...`.
#[derive(clap::Subcommand)]
pub enum EvidenceCommand {
    /// Append check evidence (one document or an array).
    #[command(
        after_help = "Example:\n  verdict check spec.yaml --subject s.json --evidence-out ev.json --principal ci && verdict evidence add ev.json"
    )]
    Add {
        /// Evidence file (JSON), or `-`.
        file: String,
        #[command(flatten)]
        common: Common,
    },
}

/// `request ...`.
#[derive(clap::Subcommand)]
pub enum RequestCommand {
    /// Create the request for an execution's current subject; prints its digest, and with
    /// `--enqueue` then its jobs, one line each as `verdict jobs enqueue` prints them.
    #[command(
        after_help = "Examples:\n  verdict request create ex-1 --budget '{\"max_runs\": 2}'\n  verdict request create ex-1 --enqueue --deadline-seconds 3600"
    )]
    Create {
        /// Execution id.
        execution: String,
        /// Budget (JSON object, every field optional): `max_runs` caps admissions for the
        /// request; `max_total_tokens`, `max_cost` and `timeout_s` cap each model run. Unknown
        /// fields are refused.
        #[arg(long, default_value = "{}")]
        budget: String,
        /// The capability the reliability ledger files this attempt under (default: the
        /// subject's mission and work item kinds).
        #[arg(long)]
        capability: Option<String>,
        /// Enqueue the request's jobs (its checks, one per verifier class, the gate) in the
        /// transaction that stores it, so that workers take it from there: the request and its
        /// jobs are stored together or not at all (an operator or the subject's producer).
        #[arg(long)]
        enqueue: bool,
        /// With `--enqueue`: past this many seconds the gate job runs whatever the other jobs
        /// are doing.
        #[arg(long, requires = "enqueue")]
        deadline_seconds: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
}

/// `run ...`.
#[derive(clap::Subcommand)]
pub enum RunCommand {
    /// Admit a verifier to a run and run preflight.
    #[command(
        after_help = "Example:\n  verdict run admit sha256:... --verifier rev --class reviewer --run run-1"
    )]
    Admit {
        /// Request digest.
        request: String,
        /// Verifier principal.
        #[arg(long)]
        verifier: String,
        /// Verifier class.
        #[arg(long)]
        class: String,
        /// Run id.
        #[arg(long)]
        run: String,
        #[command(flatten)]
        common: Common,
    },
    #[command(flatten)]
    Browse(crate::browse_cmd::RunBrowse),
    /// Cancel a run that has not ended (operator only), with a reason.
    Cancel(crate::cancel_cmd::RunCancelArgs),
}

/// `result ...`.
#[derive(clap::Subcommand)]
pub enum ResultCommand {
    /// Submit a verification result for the caller's admitted run.
    #[command(after_help = "Example:\n  VERDICT_TOKEN=$REVIEWER verdict result submit result.json")]
    Submit {
        /// Result file (JSON), or `-`.
        file: String,
        #[command(flatten)]
        common: Common,
    },
    #[command(flatten)]
    Scaffold(crate::scaffold_cmd::ResultScaffold),
}

/// `gate run EXECUTION`.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  verdict gate run ex-1 --gate merge\n\nExit status: 0 on pass, 1 on any other outcome."
)]
pub struct GateRunArgs {
    /// Execution id.
    execution: String,
    /// Output format: json (the stored decision's canonical bytes; on a store with a manual
    /// clock, the run's report `{"clock": "manual", "inserted", "decision"}` instead, so a
    /// simulated time is never read as a real decision) or text.
    #[arg(long, value_enum, default_value_t = crate::gate_cmd::Format::Json)]
    format: crate::gate_cmd::Format,
    #[command(flatten)]
    common: Common,
}

/// Prints a gate run: the decision, named with its store's clock when that clock is manual.
fn print_gate_run(
    format: crate::gate_cmd::Format,
    clock: StoreClock,
    inserted: bool,
    decision_bytes: &str,
    decision: &verdict_core::contracts::GateDecision,
) -> Result<()> {
    match (format, clock) {
        (crate::gate_cmd::Format::Json, StoreClock::System) => outln!("{decision_bytes}")?,
        (crate::gate_cmd::Format::Json, StoreClock::Manual) => {
            let report = GateRunOutcome {
                inserted,
                clock,
                decision: verdict_core::json::parse(decision_bytes.as_bytes())
                    .context("the stored decision does not read as JSON")?,
            };
            let value = serde_json::to_value(&report)?;
            outln!(
                "{}",
                String::from_utf8(verdict_core::canonical::to_vec(&value))?
            )?;
        }
        (crate::gate_cmd::Format::Text, _) => {
            let mut text = crate::gate_cmd::text(decision);
            if clock == StoreClock::Manual {
                text.insert_str(
                    0,
                    "clock     manual (the decision's time was set with --now)\n",
                );
            }
            crate::out::write_all(text.as_bytes())?;
        }
    }
    if clock == StoreClock::Manual {
        eprintln!("store clock: manual (the decision's time was set with --now)");
    }
    Ok(())
}

/// `gate replay KEY`.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  verdict gate replay sha256:...\n\nExit status: 0 when the stored bytes are reproduced exactly, 2 otherwise."
)]
pub struct GateReplayArgs {
    /// The decision's evaluation key.
    key: String,
    #[command(flatten)]
    common: Common,
}

/// An opened store with the caller's token.
pub(crate) struct Ctx {
    pub(crate) engine: Engine,
    token: Option<String>,
}

impl Ctx {
    /// An engine opened by the caller, with the caller's token.
    pub(crate) fn over(engine: Engine, token: Option<String>) -> Self {
        Self { engine, token }
    }

    pub(crate) async fn open(common: &Common) -> Result<Self> {
        let ctx = Self::open_store(common).await?;
        ctx.set_time(common).await?;
        Ok(ctx)
    }

    /// The store, without setting `--now` (which a store has no clock for before `init`).
    /// A command that came here was not sent to a server, so `--server` is refused.
    async fn open_store(common: &Common) -> Result<Self> {
        crate::remote::refuse_remote(
            common,
            "it works on a store opened here, and the server has no route for it",
        )?;
        let location = Location::resolve(common.store.as_deref())?;
        if let Location::Sqlite(path) = &location
            && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let store = verdict_store::open(&location).await?;
        Ok(Self {
            engine: Engine::new(store, common.gate.clone()),
            token: common.token()?,
        })
    }

    /// Sets `--now` on the store's manual clock; a store on the system clock refuses it.
    async fn set_time(&self, common: &Common) -> Result<()> {
        if let Some(now) = common.read_now()? {
            self.set_now(&now).await?;
        }
        Ok(())
    }

    async fn set_now(&self, now: &Timestamp) -> Result<()> {
        self.engine
            .set_manual_time(now)
            .await
            .with_context(|| format!("--now {now}"))
    }

    /// The principal of the token given. Every command that acts as someone comes through
    /// here, so an attempt with a wrong or missing token is recorded as a denial.
    pub(crate) async fn caller(&self) -> Result<Principal> {
        let Some(token) = self.token.as_deref() else {
            let err = self.engine.authenticate("").await.err();
            bail!(
                "unauthenticated: give a token with --token or VERDICT_TOKEN{}",
                err.filter(|e| e.code() != "unauthenticated")
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            );
        };
        Ok(self.engine.authenticate(token).await?)
    }
}

fn read_json(file: &str) -> Result<Value> {
    let bytes = input::read_all(file)?;
    verdict_core::json::parse(&bytes).map_err(|e| anyhow::anyhow!("{file}: {e}"))
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// The server's name for a role.
fn role_name(role: Role) -> RoleName {
    match role {
        Role::Operator => RoleName::Operator,
        Role::Producer => RoleName::Producer,
        Role::Runner => RoleName::Runner,
        Role::Verifier => RoleName::Verifier,
        Role::Human => RoleName::Human,
    }
}

fn parse_role(text: &str) -> Result<Role> {
    Role::ALL
        .into_iter()
        .find(|r| r.as_str() == text)
        .ok_or_else(|| anyhow::anyhow!("unknown role {text:?}"))
}

/// Runs a lifecycle command.
pub fn run(cmd: LifecycleCommand) -> Result<ExitCode> {
    runtime()?.block_on(dispatch(cmd))
}

/// Runs `gate run`.
pub fn gate_run(args: &GateRunArgs) -> Result<ExitCode> {
    runtime()?.block_on(async {
        if let Some(remote) = crate::remote::client(&args.common)? {
            let run: GateRunOutcome = remote
                .post_empty(&format!(
                    "v1/executions/{}/gate-runs",
                    segment(&args.execution)
                ))
                .await?;
            // The server sends the stored decision as JSON; its canonical form is the stored
            // bytes, which is what local mode prints.
            let decision: verdict_core::contracts::GateDecision =
                serde_json::from_value(run.decision.clone())
                    .context("the server's decision does not read as a gate decision")?;
            let bytes = String::from_utf8(verdict_core::canonical::to_vec(&run.decision))?;
            print_gate_run(args.format, run.clock, run.inserted, &bytes, &decision)?;
            return Ok(crate::gate_cmd::exit_code(decision.outcome));
        }
        let ctx = Ctx::open(&args.common).await?;
        let caller = ctx.caller().await?;
        let g = ctx.engine.gate_run(&caller, &args.execution).await?;
        let clock = ctx.engine.clock().await?;
        print_gate_run(args.format, clock, g.inserted, &g.bytes, &g.decision)?;
        Ok(crate::gate_cmd::exit_code(g.decision.outcome))
    })
}

/// Runs `gate replay`.
pub fn gate_replay(args: &GateReplayArgs) -> Result<ExitCode> {
    runtime()?.block_on(async {
        let remote = crate::remote::client(&args.common)?;
        let key: Digest = args
            .key
            .parse()
            .map_err(|e| anyhow::anyhow!("{:?}: {e}", args.key))?;
        let bytes = if let Some(remote) = remote {
            // The server answers only when the Gate reproduced the stored bytes; their
            // canonical form is those bytes.
            let r: verdict_server::reads::Replayed = remote
                .get(&format!(
                    "v1/gate/decisions/{}/replay",
                    segment(key.as_str())
                ))
                .await?;
            String::from_utf8(verdict_core::canonical::to_vec(&r.decision))?
        } else {
            let ctx = Ctx::open(&args.common).await?;
            let caller = ctx.caller().await?;
            ctx.engine.gate_replay(&caller, &key).await?.bytes
        };
        outln!("{bytes}")?;
        eprintln!("replayed: identical to the stored decision");
        Ok(ExitCode::SUCCESS)
    })
}

async fn dispatch(cmd: LifecycleCommand) -> Result<ExitCode> {
    use LifecycleCommand as C;
    match cmd {
        C::Init {
            operator,
            clock,
            common,
        } => {
            crate::remote::refuse_remote(
                &common,
                "init creates the store and its first operator, so it runs where the store is",
            )?;
            // `--now` is judged before anything is written: `init` stores the clock and the
            // first operator at once, so a refusal after it would leave a store whose only
            // operator's token was never shown, and that no second `init` may fix.
            let now = common.read_now()?;
            if now.is_some() && matches!(clock, ClockArg::System) {
                bail!(
                    "--now is only for a store that keeps a manual clock: give --clock manual with it, or leave it out (this store would keep the system clock and take no time from the caller); nothing was written"
                );
            }
            let ctx = Ctx::open_store(&common).await?;
            let clock = StoreClock::from(clock);
            let token = ctx.engine.init(&operator, clock).await?;
            eprintln!(
                "store: {} (clock: {})\noperator {operator:?} created; its token is shown only now:",
                ctx.engine.describe_store(),
                clock.as_str()
            );
            outln!("{token}")?;
            // Set after the token is shown, so that nothing failing here can lose it.
            if let Some(now) = &now {
                ctx.set_now(now).await?;
            }
        }
        C::Principal(PrincipalCommand::Add {
            name,
            role,
            db_login,
            common,
        }) => {
            let role = parse_role(&role)?;
            if let Some(remote) = crate::remote::client(&common)? {
                if db_login {
                    bail!(
                        "--db-login cannot be sent to a server (--server): a database login is made where the store is"
                    );
                }
                let created: PrincipalCreated = remote
                    .post(
                        "v1/principals",
                        &NewPrincipal {
                            name: name.clone(),
                            role: role_name(role),
                        },
                    )
                    .await?;
                eprintln!(
                    "principal {name:?} ({}) created; its token is shown only now:",
                    role.as_str()
                );
                outln!("{}", created.token)?;
                return Ok(ExitCode::SUCCESS);
            }
            let ctx = Ctx::open(&common).await?;
            let caller = ctx.caller().await?;
            let token = ctx.engine.add_principal(&caller, &name, role).await?;
            eprintln!(
                "principal {name:?} ({}) created; its token is shown only now:",
                role.as_str()
            );
            outln!("{token}")?;
            if db_login {
                let login = ctx.engine.give_db_login(&caller, &name).await?;
                return show_login(&name, &login);
            }
        }
        C::Principal(PrincipalCommand::Login(command)) => {
            let (LoginCommand::Give { name, common } | LoginCommand::Revoke { name, common }) =
                &command;
            crate::remote::refuse_remote(
                common,
                "a database login is changed where the store is, by an operator",
            )?;
            let ctx = Ctx::open(common).await?;
            let caller = ctx.caller().await?;
            if let LoginCommand::Give { .. } = command {
                let login = ctx.engine.give_db_login(&caller, name).await?;
                return show_login(name, &login);
            }
            let taken = ctx.engine.take_db_login(&caller, name).await?;
            outln!(
                "database login {:?} of {name:?} taken back: it no longer logs in",
                taken.user
            )?;
            return Ok(sessions_left(taken.sessions_left));
        }
        C::Principal(PrincipalCommand::Token(TokenCommand::Revoke {
            name,
            reason,
            common,
        })) => {
            if let Some(remote) = crate::remote::client(&common)? {
                let _: PrincipalOut = remote
                    .post(
                        &format!("v1/principals/{}/token/revoke", segment(&name)),
                        &TokenChange { reason },
                    )
                    .await?;
            } else {
                let ctx = Ctx::open(&common).await?;
                ctx.engine
                    .revoke_token(&ctx.caller().await?, &name, &reason)
                    .await?;
            }
            outln!("revoked the token of {name}")?;
        }
        C::Principal(PrincipalCommand::Token(TokenCommand::Rotate {
            name,
            reason,
            common,
        })) => {
            let token = if let Some(remote) = crate::remote::client(&common)? {
                let rotated: PrincipalCreated = remote
                    .post(
                        &format!("v1/principals/{}/token/rotate", segment(&name)),
                        &TokenChange { reason },
                    )
                    .await?;
                rotated.token
            } else {
                let ctx = Ctx::open(&common).await?;
                ctx.engine
                    .rotate_token(&ctx.caller().await?, &name, &reason)
                    .await?
            };
            eprintln!("the token of {name:?} is replaced; the new one is shown only now:");
            outln!("{token}")?;
        }
        C::Grant(GrantCommand::Add {
            id,
            principal,
            execution,
            mission,
            access,
            expires,
            common,
        }) => {
            let (kind, scope) = match (execution, mission) {
                (Some(e), _) => (ScopeKind::Execution, e),
                (None, Some(m)) => (ScopeKind::Mission, m),
                (None, None) => bail!("give --execution or --mission"),
            };
            let access = if access == "write" {
                Access::Write
            } else {
                Access::Read
            };
            let expires: Timestamp = expires
                .parse()
                .map_err(|e| anyhow::anyhow!("--expires: {e}"))?;
            if let Some(remote) = crate::remote::client(&common)? {
                let _: GrantOut = remote
                    .post(
                        "v1/grants",
                        &NewGrant {
                            grant_id: id.clone(),
                            principal,
                            scope: match kind {
                                ScopeKind::Execution => ScopeName::Execution,
                                ScopeKind::Mission => ScopeName::Mission,
                            },
                            scope_id: scope,
                            access: match access {
                                Access::Write => AccessName::Write,
                                Access::Read => AccessName::Read,
                            },
                            expires_at: expires.to_string(),
                        },
                    )
                    .await?;
                outln!("granted {id}")?;
                return Ok(ExitCode::SUCCESS);
            }
            let ctx = Ctx::open(&common).await?;
            ctx.engine
                .grant(
                    &ctx.caller().await?,
                    &id,
                    &principal,
                    kind,
                    &scope,
                    access,
                    &expires,
                )
                .await?;
            outln!("granted {id}")?;
        }
        C::Grant(GrantCommand::Revoke { id, reason, common }) => {
            if let Some(remote) = crate::remote::client(&common)? {
                let _: GrantOut = remote
                    .post(
                        &format!("v1/grants/{}/revoke", segment(&id)),
                        &Reason { reason },
                    )
                    .await?;
            } else {
                let ctx = Ctx::open(&common).await?;
                ctx.engine
                    .revoke(&ctx.caller().await?, &id, &reason)
                    .await?;
            }
            outln!("revoked {id}")?;
        }
        C::Policy(PolicyCommand::Set { file, common }) => {
            let d = if let Some(remote) = crate::remote::client(&common)? {
                let set: GatePolicy = remote.put("v1/gate/policy", &read_json(&file)?).await?;
                set.policy_digest
            } else {
                let ctx = Ctx::open(&common).await?;
                ctx.engine
                    .set_policy(&ctx.caller().await?, &read_json(&file)?)
                    .await?
            };
            outln!("{d}")?;
        }
        C::Subject(SubjectCommand::Put { file, common }) => {
            let d = if let Some(remote) = crate::remote::client(&common)? {
                let stored: Stored = remote.post("v1/subjects", &read_json(&file)?).await?;
                stored.digest
            } else {
                let ctx = Ctx::open(&common).await?;
                ctx.engine
                    .put_subject(&ctx.caller().await?, &read_json(&file)?)
                    .await?
            };
            outln!("{d}")?;
        }
        C::Principal(PrincipalCommand::Browse(cmd)) => {
            return crate::browse_cmd::principal(cmd).await;
        }
        C::Grant(GrantCommand::Browse(cmd)) => return crate::browse_cmd::grant(cmd).await,
        C::Policy(PolicyCommand::Browse(cmd)) => return crate::browse_cmd::policy(cmd).await,
        C::Run(RunCommand::Browse(cmd)) => return crate::browse_cmd::run(cmd).await,
        C::Subject(SubjectCommand::Scaffold(cmd)) => {
            return crate::scaffold_cmd::subject(cmd).await;
        }
        C::Result(ResultCommand::Scaffold(cmd)) => return crate::scaffold_cmd::result(cmd).await,
        C::Evidence(EvidenceCommand::Add { file, common }) => {
            let remote = crate::remote::client(&common)?;
            let ctx = match remote {
                Some(_) => None,
                None => Some(Ctx::open(&common).await?),
            };
            let docs = match read_json(&file)? {
                Value::Array(items) => items,
                one => vec![one],
            };
            let digests = match (&remote, &ctx) {
                (Some(remote), _) => {
                    let stored: EvidenceStored = remote
                        .post("v1/evidence", &EvidenceBatch { evidence: docs })
                        .await?;
                    stored.digests
                }
                (None, Some(ctx)) => ctx.engine.add_evidence(&ctx.caller().await?, &docs).await?,
                (None, None) => bail!("neither a server nor a store to add evidence to"),
            };
            for d in digests {
                outln!("{d}")?;
            }
        }
        C::Request(RequestCommand::Create {
            execution,
            budget,
            capability,
            enqueue,
            deadline_seconds,
            common,
        }) => {
            let remote = crate::remote::client(&common)?;
            let budget = verdict_core::json::parse(budget.as_bytes())
                .map_err(|e| anyhow::anyhow!("--budget: {e}"))?;
            let jobs = enqueue.then_some(NewJobs { deadline_seconds });
            let (digest, jobs) = if let Some(remote) = remote {
                let stored: RequestStored = remote
                    .post(
                        "v1/requests",
                        &NewRequest {
                            execution,
                            budget,
                            capability,
                            jobs,
                        },
                    )
                    .await?;
                (stored.digest, stored.jobs.unwrap_or_default())
            } else {
                let ctx = Ctx::open(&common).await?;
                let caller = ctx.caller().await?;
                match jobs {
                    None => (
                        ctx.engine
                            .create_request_for(&caller, &execution, &budget, capability.as_deref())
                            .await?,
                        Vec::new(),
                    ),
                    Some(jobs) => {
                        // The server's bounds, so that both faces refuse the same deadlines.
                        let deadline = verdict_server::jobs::deadline(&jobs, "--deadline-seconds")
                            .map_err(anyhow::Error::msg)?;
                        let (digest, jobs) = ctx
                            .engine
                            .create_request_enqueued(
                                &caller,
                                &execution,
                                &budget,
                                capability.as_deref(),
                                deadline,
                            )
                            .await?;
                        (digest, jobs.into_iter().map(Into::into).collect())
                    }
                }
            };
            outln!("{digest}")?;
            for job in &jobs {
                outln!("{}", crate::worker_cmd::line(job))?;
            }
        }
        C::Run(RunCommand::Cancel(args)) => return crate::cancel_cmd::run_cancel(args).await,
        C::Run(RunCommand::Admit {
            request,
            verifier,
            class,
            run,
            common,
        }) => {
            let remote = crate::remote::client(&common)?;
            let request: Digest = request
                .parse()
                .map_err(|e| anyhow::anyhow!("{request:?}: {e}"))?;
            let pre = if let Some(remote) = remote {
                remote
                    .post(
                        "v1/runs",
                        &NewRun {
                            request,
                            verifier,
                            class,
                            run_id: run.clone(),
                        },
                    )
                    .await?
            } else {
                let ctx = Ctx::open(&common).await?;
                let pre = ctx
                    .engine
                    .admit(&ctx.caller().await?, &request, &verifier, &class, &run)
                    .await?;
                Admitted {
                    run_id: run.clone(),
                    preflight_outcome: pre.outcome.as_str().to_owned(),
                    skipped: pre.skipped,
                    reasons: pre.reasons,
                }
            };
            // Preflight speaks only when the deterministic evidence already decides; otherwise
            // its outcome is the Gate's without any verifier, which says nothing about the run.
            if pre.skipped {
                outln!(
                    "admitted {run}; preflight decided {} from the deterministic evidence alone, so the verifier will not be called:",
                    pre.preflight_outcome
                )?;
                for r in &pre.reasons {
                    outln!("  {r}")?;
                }
            } else {
                outln!("admitted {run}")?;
            }
        }
        C::Result(ResultCommand::Submit { file, common }) => {
            let s = if let Some(remote) = crate::remote::client(&common)? {
                remote.post("v1/results", &read_json(&file)?).await?
            } else {
                let ctx = Ctx::open(&common).await?;
                let s = ctx
                    .engine
                    .submit_result(&ctx.caller().await?, &read_json(&file)?)
                    .await?;
                SubmittedOut {
                    digest: s.digest,
                    counted: s.counted,
                    why_not: s.why_not,
                }
            };
            outln!("{}", s.digest)?;
            if let Some(why) = s.why_not {
                eprintln!("stored as history, not counted: {why}");
            }
        }
        C::Decide {
            execution,
            subject,
            policy,
            approve,
            reject: _,
            reason,
            reviewed_decision,
            common,
        } => {
            let remote = crate::remote::client(&common)?;
            let verdict = if approve {
                HumanVerdict::Approve
            } else {
                HumanVerdict::Reject
            };
            let digest = |flag: &str, text: &str| -> Result<Digest> {
                text.parse()
                    .map_err(|e| anyhow::anyhow!("--{flag} {text:?}: {e}"))
            };
            let reviewed = Reviewed {
                subject_digest: digest("subject", &subject)?,
                policy_digest: digest("policy", &policy)?,
                decision_key: reviewed_decision
                    .as_deref()
                    .map(|k| digest("reviewed-decision", k))
                    .transpose()?,
            };
            let d = if let Some(remote) = remote {
                let stored: Stored = remote
                    .post(
                        "v1/human-decisions",
                        &NewHumanDecision {
                            execution,
                            decision: if approve {
                                Verdict::Approve
                            } else {
                                Verdict::Reject
                            },
                            reason,
                            subject_digest: reviewed.subject_digest,
                            policy_digest: reviewed.policy_digest,
                            reviewed_decision: reviewed.decision_key,
                        },
                    )
                    .await?;
                stored.digest
            } else {
                let ctx = Ctx::open(&common).await?;
                ctx.engine
                    .decide(
                        &ctx.caller().await?,
                        &execution,
                        verdict,
                        &reason,
                        &reviewed,
                    )
                    .await?
            };
            outln!("{d}")?;
        }
        C::Status {
            execution,
            json,
            common,
        } => {
            // The gate's name, for the text: the server decides with its own gate.
            let (s, gate) = if let Some(remote) = crate::remote::client(&common)? {
                let s: verdict_engine::Status = remote
                    .get(&format!("v1/executions/{}/status", segment(&execution)))
                    .await?;
                let gate = if s.gate.is_some() && !json {
                    let g: GatePolicy = remote.get("v1/gate/policy").await?;
                    g.gate
                } else {
                    common.gate.clone()
                };
                (s, gate)
            } else {
                let ctx = Ctx::open(&common).await?;
                let s = ctx.engine.status(&ctx.caller().await?, &execution).await?;
                (s, ctx.engine.gate().to_owned())
            };
            let passing = s
                .applicable
                .as_ref()
                .is_some_and(|v| v.decision.outcome.as_str() == "pass");
            if json {
                outln!("{}", serde_json::to_string_pretty(&s)?)?;
            } else {
                match (&s.applicable, &s.latest) {
                    (Some(v), _) => outln!(
                        "{execution}: {} applies\n{}",
                        v.decision.outcome.as_str(),
                        line(v)
                    )?,
                    (None, Some(v)) => outln!(
                        "{execution}: no decision applies; the latest does not because {}\n{}",
                        why(v),
                        line(v)
                    )?,
                    (None, None) => outln!("{execution}: no decision yet")?,
                }
                if let Some(c) = &s.cancelled {
                    outln!("{}", crate::cancel_cmd::describe(c))?;
                }
                // The digests a human decision must name (`decide --subject --policy`).
                if let Some(h) = &s.head {
                    outln!("subject {} (generation {})", h.subject_digest, h.generation)?;
                }
                if let Some(g) = &s.gate {
                    outln!(
                        "policy {} (gate {}, revision {})",
                        g.policy_digest,
                        gate,
                        g.revision
                    )?;
                }
                outln!("store clock: {} at {}", s.clock.as_str(), s.now)?;
            }
            return Ok(if passing {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        C::History {
            execution,
            json,
            common,
        } => {
            let h: verdict_engine::History = if let Some(remote) = crate::remote::client(&common)? {
                remote
                    .get(&format!("v1/executions/{}/history", segment(&execution)))
                    .await?
            } else {
                let ctx = Ctx::open(&common).await?;
                ctx.engine.history(&ctx.caller().await?, &execution).await?
            };
            if json {
                outln!("{}", serde_json::to_string_pretty(&h)?)?;
            } else {
                outln!("decisions of {execution}:")?;
                for v in &h.decisions {
                    outln!(
                        "  {}  {}",
                        if v.applies() {
                            "applies".to_owned()
                        } else {
                            format!("not applicable ({})", why(v))
                        },
                        line(v)
                    )?;
                }
                outln!("runs:")?;
                for r in &h.runs {
                    let counted = r
                        .counted
                        .map_or("no result", |c| if c { "counted" } else { "history only" });
                    outln!(
                        "  {} {} ({}) generation {} {} [{counted}]{}",
                        r.run_id,
                        r.verifier,
                        r.class,
                        r.generation,
                        r.status,
                        r.detail
                            .as_deref()
                            .map(|d| format!(": {d}"))
                            .unwrap_or_default()
                    )?;
                    for line in run_calls(r) {
                        outln!("    {line}")?;
                    }
                }
            }
        }
        C::Quickstart {
            store,
            token,
            server,
        } => {
            if server.is_some() {
                bail!(
                    "the quickstart cannot run against a server (--server / VERDICT_SERVER): it makes its own principals, gate and checked service where the store is"
                );
            }
            let ctx = Ctx::open(&Common {
                token,
                token_file: None,
                store: store.clone(),
                server: None,
                gate: crate::quickstart::GATE.to_owned(),
                now: None,
            })
            .await?;
            // The first failed write is kept and reported once the flow has ended.
            let mut written = Ok(());
            let q = crate::quickstart::run(&ctx.engine, ctx.token.as_deref(), &mut |l: &str| {
                if written.is_ok() {
                    written = outln!("{l}");
                }
            })
            .await?;
            written?;
            if let Some(token) = &q.operator_token {
                outln!(
                    "this store was empty, so the quickstart initialised it; its operator's token is shown only now (give it with --token or VERDICT_TOKEN to run the quickstart again):\n{token}"
                )?;
            }
            let last = q.decisions.last().map_or("none", |d| d.outcome.as_str());
            outln!("final decision: {last}")?;
            // Commands that work as printed, in the same shell: a store named by `--store`
            // (rather than by VERDICT_STORE or the default) is named again.
            let store = store
                .as_deref()
                .filter(|s| std::env::var("VERDICT_STORE").ok().as_deref() != Some(*s))
                .map_or(String::new(), |s| format!(" --store {}", shell_word(s)));
            // Reads need a token too: the operator's is named again unless it came from
            // VERDICT_TOKEN, which the same shell still holds. A new store's operator token was
            // printed just above.
            let token = q
                .operator_token
                .as_deref()
                .or(ctx.token.as_deref())
                .filter(|t| std::env::var("VERDICT_TOKEN").ok().as_deref() != Some(*t))
                .map_or(String::new(), |t| format!(" --token {}", shell_word(t)));
            let ex = shell_word(&q.execution);
            outln!("inspect it with:")?;
            outln!("  verdict status {ex} --gate quickstart{store}{token}")?;
            outln!("  verdict history {ex} --gate quickstart{store}{token}")?;
            outln!("  verdict audit verify{store}")?;
            return Ok(crate::gate_cmd::exit_code(
                q.decisions
                    .last()
                    .map_or(verdict_core::contracts::Outcome::Blocked, |d| d.outcome),
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A run's model calls for `history`: one line per receipt, then the cache key its result was
/// reused from.
fn run_calls(r: &verdict_engine::RunView) -> Vec<String> {
    let mut lines: Vec<String> = r
        .receipts
        .iter()
        .map(|c| {
            let count = |t: Option<u64>| t.map_or_else(|| "?".to_owned(), |t| t.to_string());
            let cost = c
                .cost_estimate
                .map(|x| format!(", cost {x:.6}"))
                .unwrap_or_default();
            let detail = c
                .detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            format!(
                "call sample {} attempt {}: {} {} snapshot {}, tokens {} in {} out{}{cost}, {} ms, {}{detail}",
                c.sample,
                c.attempt,
                c.provider,
                c.model,
                c.snapshot.as_deref().unwrap_or("unreported"),
                count(c.tokens_in),
                count(c.tokens_out),
                if c.tokens_estimated { " (estimated)" } else { "" },
                c.latency_ms,
                c.outcome
            )
        })
        .collect();
    if let Some(k) = &r.cache_key {
        lines.push(format!("result reused from the cache ({k}); no call made"));
    }
    lines
}

/// `s` as one POSIX shell word: as it is when it holds only characters no shell treats
/// specially, else in single quotes.
fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn why(v: &DecisionView) -> String {
    v.not_applicable
        .iter()
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn line(v: &DecisionView) -> String {
    let key = v
        .decision
        .evaluation_key
        .as_ref()
        .map_or("-", |k| k.as_str());
    let codes: Vec<&str> = v.decision.reasons.iter().map(|r| r.code.as_str()).collect();
    format!(
        "{} generation {} key {key}{}",
        v.decision.outcome.as_str(),
        v.generation,
        if codes.is_empty() {
            String::new()
        } else {
            format!(" ({})", codes.join(", "))
        }
    )
}

/// Prints a login given: who it is for, and its URL, once, on standard output.
fn show_login(name: &str, login: &verdict_store::DbLogin) -> Result<ExitCode> {
    eprintln!(
        "database login {:?} for {name:?}; its connection URL is shown only now:",
        login.user
    );
    outln!("{}", login.url)?;
    Ok(ExitCode::SUCCESS)
}

/// Exit 1, with a warning, when sessions of a login changed could not be ended.
fn sessions_left(left: u32) -> ExitCode {
    if left == 0 {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "warning: {left} session(s) of this login are still open: the store's routines may not end another login's session (grant pg_signal_backend to the store's owner role, then run `principal login revoke` again, or end them as a superuser)"
    );
    ExitCode::from(1)
}
