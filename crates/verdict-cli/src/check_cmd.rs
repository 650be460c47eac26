//! `verdict check SPEC`: run a check spec and report; optionally write check evidence.

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use verdict_core::contracts::Name;
use verdict_probes::baseline::Baseline;
use verdict_probes::duration::Dur;
use verdict_probes::evidence;
use verdict_probes::load::{self, Spec};
use verdict_probes::progress::{Progress, color_wanted};
use verdict_probes::report::table::terminal_text;
use verdict_probes::report::{self, Format};
use verdict_probes::runner::{self, RunOptions, StopReason, Stopper};

const EXAMPLES: &str = "Examples:
  verdict check examples/checks/web/web.yaml --var port=8080
  verdict check spec.yaml --format junit > checks.xml
  verdict check spec.yaml --print-definitions
  verdict check spec.yaml --subject subject.json --evidence-out evidence.json --principal ci-runner
  verdict check spec.yaml --baseline-out before.json      # before the agent acts
  verdict check spec.yaml --baseline before.json          # afterwards
  verdict check spec.yaml --during -- ./run-agent.sh      # sample safety holds while it runs

Exit status: 0 when every required criterion passed; 1 when one failed or errored; 2 when the
spec, the arguments or an input file is invalid (nothing ran); 130 when interrupted.";

/// Arguments of `verdict check`.
#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The check spec (YAML, or strict JSON when named `.json`).
    spec: PathBuf,
    /// Sets a spec variable, overriding the spec's `vars` (repeatable): `--var ns=shop`.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = ["table", "json", "junit", "tap"])]
    format: String,
    /// How many observations may run at once.
    #[arg(long, default_value_t = runner::DEFAULT_JOBS)]
    jobs: usize,
    /// The whole run must end within this (`90s`, `10m`); criteria still running are errors.
    #[arg(long, value_name = "DURATION")]
    deadline: Option<String>,
    /// Print each criterion's definition digest (what a subject pins in `checks[]`) and exit.
    #[arg(long)]
    print_definitions: bool,
    /// Print each criterion's normalised definition as JSON and exit.
    #[arg(long)]
    print_normalised: bool,
    /// The subject (JSON) the evidence is about; needs --evidence-out.
    #[arg(long, value_name = "FILE", requires = "evidence_out")]
    subject: Option<PathBuf>,
    /// Write check evidence (a JSON array of check evidence documents, docs/spec/evidence.md); needs --subject.
    #[arg(long, value_name = "FILE", requires = "subject")]
    evidence_out: Option<PathBuf>,
    /// The runner principal that produces the evidence.
    #[arg(long, env = "VERDICT_PRINCIPAL", hide_env_values = true)]
    principal: Option<String>,
    /// Compare `unchanged` criteria with this baseline.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Snapshot the `unchanged` criteria into this file (and, without --during, run nothing else).
    #[arg(long, value_name = "FILE", conflicts_with = "baseline")]
    baseline_out: Option<PathBuf>,
    /// Run the command after `--` as the agent, sampling safety and catastrophic hold criteria
    /// while it runs; the other criteria run after it ends.
    #[arg(long, requires = "agent")]
    during: bool,
    /// The agent command (after `--`, with --during).
    #[arg(last = true, value_name = "CMD")]
    agent: Vec<String>,
    /// No progress on stderr.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    local: crate::remote::NoServer,
}

pub(crate) fn parse_vars(raw: &[String]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for v in raw {
        let Some((k, val)) = v.split_once('=') else {
            bail!("--var {v:?} must be NAME=VALUE");
        };
        if !load::is_var_name(k) {
            bail!("--var {v:?}: invalid variable name {k:?}");
        }
        out.insert(k.to_owned(), val.to_owned());
    }
    Ok(out)
}

fn print_definitions(spec: &Spec, format: &str, normalised: bool) -> Result<()> {
    let mut out = String::new();
    if normalised {
        let docs: Vec<serde_json::Value> = spec
            .checks
            .iter()
            .map(|c| serde_json::json!({"id": c.id, "definition_digest": c.definition_digest, "definition": c.definition}))
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&docs)?)?;
    } else if format == "json" {
        // Exactly the shape of a subject's `checks[]` entries.
        let pins: Vec<serde_json::Value> = spec
            .checks
            .iter()
            .map(|c| serde_json::json!({"id": c.id, "definition_digest": c.definition_digest, "criteria": [c.id]}))
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&pins)?)?;
    } else {
        for c in &spec.checks {
            writeln!(out, "{} {}", c.id, c.definition_digest)?;
        }
    }
    crate::out::write_all(out.as_bytes())
}

/// Runs `verdict check`.
pub fn run(args: &Args) -> Result<ExitCode> {
    if args.during && args.agent.is_empty() {
        bail!("--during needs the agent command after --");
    }
    if !args.during && !args.agent.is_empty() {
        bail!("a command after -- needs --during");
    }
    let vars = parse_vars(&args.vars)?;
    let spec = load::load_file(&args.spec, &vars)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.spec.display()))?;
    if args.print_definitions || args.print_normalised {
        print_definitions(&spec, &args.format, args.print_normalised)?;
        return Ok(ExitCode::SUCCESS);
    }
    let format: Format = args
        .format
        .parse()
        .map_err(|e: String| anyhow::anyhow!(e))?;
    let deadline = args
        .deadline
        .as_deref()
        .map(|d| {
            Dur::parse(d)
                .map(Dur::std)
                .map_err(|e| anyhow::anyhow!("--deadline: {e}"))
        })
        .transpose()?;
    let bound = match &args.subject {
        Some(path) => {
            let bytes = crate::input::read_all(&path.display().to_string())?;
            let b = evidence::read_subject(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let unpinned =
                evidence::check_pins(&b.subject, &spec).map_err(|e| anyhow::anyhow!(e))?;
            for id in unpinned {
                eprintln!(
                    "verdict: warning: the subject does not pin {}; the Gate will ignore its evidence",
                    terminal_text(&id)
                );
            }
            Some(b)
        }
        None => None,
    };
    let principal: Option<Name> = match (&args.evidence_out, &args.principal) {
        (Some(_), None) => bail!(
            "--evidence-out needs --principal (or VERDICT_PRINCIPAL): the runner that produces it"
        ),
        (_, Some(p)) => Some(p.parse().map_err(|e| anyhow::anyhow!("--principal: {e}"))?),
        (None, None) => None,
    };
    if let (Some(b), Some(p)) = (&bound, &principal)
        && b.subject.producer.principal == *p
    {
        eprintln!(
            "verdict: warning: {p} is the subject's producer; the Gate will not count its evidence"
        );
    }
    let baseline = match &args.baseline {
        Some(path) => {
            let bytes = crate::input::read_all(&path.display().to_string())?;
            Some(
                Baseline::from_bytes(&bytes, &verdict_probes::clock::now())
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            )
        }
        None => None,
    };

    // Probes wait on I/O; one thread serves them all with the least overhead per sample (see
    // docs/benchmarks/verdict-probes.md), and file reads go to tokio's blocking pool.
    let rt = Runtime(Some(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the runtime")?,
    ));
    // Orphans that a probe's program or the agent detached from its process group (setsid)
    // become this process's children, which the run kills when it ends; every child of this
    // process is started by the probes' runner, so none is taken for an orphan by mistake.
    if let Err(e) = verdict_probes::process::adopt_orphans() {
        eprintln!(
            "verdict: warning: cannot adopt orphaned processes ({e}); a program that detaches from its process group may outlive the run"
        );
    }
    let stopper = Stopper::new();
    {
        let s = stopper.clone();
        rt.spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                s.stop(StopReason::Interrupted);
            }
        });
    }

    let mut baseline = baseline;
    if let Some(out) = &args.baseline_out {
        let taken = rt.block_on(runner::take_baseline(&spec, args.jobs, &stopper))?;
        match taken {
            Ok(b) => {
                let bytes = serde_json::to_vec_pretty(&b)?;
                evidence::write_atomic(out, &bytes)
                    .with_context(|| format!("cannot write {}", out.display()))?;
                if !args.quiet {
                    eprintln!(
                        "verdict: baseline of {} criteria written to {}",
                        b.criteria.len(),
                        out.display()
                    );
                }
                // Printed even when quiet: a later run records the digest it compared with,
                // and matching the two is how a baseline file is shown to be this one.
                for (id, snap) in &b.criteria {
                    eprintln!(
                        "verdict: baseline of {}: {}",
                        terminal_text(id),
                        snap.digest()
                    );
                }
                if !args.during {
                    return Ok(ExitCode::SUCCESS);
                }
                baseline = Some(b);
            }
            Err(failures) => {
                for (id, why) in failures {
                    // The reason quotes what the system printed: escaped as in the table.
                    eprintln!(
                        "verdict: cannot snapshot {}: {}",
                        terminal_text(&id),
                        terminal_text(&why)
                    );
                }
                eprintln!("verdict: no baseline written");
                return Ok(if stopper.reason().is_some() {
                    ExitCode::from(130)
                } else {
                    ExitCode::from(1)
                });
            }
        }
    }

    let progress = Arc::new(Progress::new(spec.checks.len(), !args.quiet));
    let observer: Arc<dyn runner::Observer> = if args.quiet {
        Arc::new(runner::Quiet)
    } else {
        progress.clone()
    };
    let opts = RunOptions {
        jobs: args.jobs,
        deadline,
        baseline,
        agent: args.during.then(|| args.agent.clone()),
    };
    let report = rt.block_on(runner::run(&spec, opts, observer, &stopper))?;
    progress.finish();

    let color = format == Format::Table && color_wanted(std::io::stdout().is_terminal());
    crate::out::write_all(report::render(&report, format, color).as_bytes())?;

    if let (Some(out), Some(b), Some(p)) = (&args.evidence_out, &bound, &principal) {
        let docs = evidence::evidence_documents(&report, &spec, &b.digest, p)
            .map_err(|e| anyhow::anyhow!(e))?;
        let mut bytes = serde_json::to_vec_pretty(&docs)?;
        bytes.push(b'\n');
        evidence::write_atomic(out, &bytes)
            .with_context(|| format!("cannot write {}", out.display()))?;
    }
    drop(rt);
    Ok(match stopper.reason() {
        Some(StopReason::Interrupted) => ExitCode::from(130),
        _ if report.passed => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

/// The run's runtime, shut down with a timeout however `run` returns: a blocking thread still
/// inside a read that never ends (a file system that hangs) must not keep verdict from exiting
/// after it has reported.
struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    fn block_on<F: std::future::Future>(&self, f: F) -> Result<F::Output> {
        let rt = self.0.as_ref().context("the runtime is gone")?;
        Ok(rt.block_on(f))
    }

    fn spawn<F>(&self, f: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        if let Some(rt) = &self.0 {
            rt.spawn(f);
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_timeout(std::time::Duration::from_millis(100));
        }
    }
}
