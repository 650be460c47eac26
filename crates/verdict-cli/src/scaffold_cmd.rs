//! `verdict subject new` and `verdict result template`: the documents of the hand flow, built
//! with every digest computed (by `verdict_engine::scaffold`), printed or put.

use crate::lifecycle_cmd::{Common, Ctx};
use anyhow::{Context as _, Result, bail};
use std::path::PathBuf;
use std::process::ExitCode;
use verdict_core::contracts::{Criterion, RiskClass};
use verdict_core::digest::Digest;
use verdict_engine::scaffold::{self, ResourceInput, SubjectInput};

/// `subject new`.
#[derive(clap::Subcommand)]
pub enum SubjectScaffold {
    /// Build a subject from an objective, resources and check specs, every digest computed;
    /// print it, or put it with --put (as the producer).
    #[command(after_help = "Example:
  verdict subject new --execution ex-1 --producer coder --producer-run build-7 \\
      --objective objective.md --resource diff=change.diff --check checks.yaml \\
      --criterion 'docs=The README documents the new flag'

Each criterion of each check spec becomes a subject criterion (its description is the text)
and a check pin with the definition digest `verdict check --print-definitions` prints.
Without --put the subject is printed as JSON and its digest on standard error; with --put it is
stored as the execution's current subject and its digest printed.")]
    New(Box<NewArgs>),
}

/// Arguments of `subject new`.
#[derive(clap::Args)]
pub struct NewArgs {
    /// The execution the subject belongs to.
    #[arg(long)]
    execution: String,
    /// Its generation: 1 for a first attempt, the next number for a retry.
    #[arg(long, default_value_t = 1)]
    generation: u64,
    /// The mission, if any. A producer puts a subject naming a mission only while it holds a
    /// write grant on that mission; a grant on the execution alone is refused.
    #[arg(long)]
    mission: Option<String>,
    /// The producer principal (with --put, the caller unless it is an operator).
    #[arg(long)]
    producer: String,
    /// The producer's run.
    #[arg(long, value_name = "RUN")]
    producer_run: String,
    /// A work item, as KIND=ID@VERSION (repeatable).
    #[arg(long = "work-item", value_name = "KIND=ID@VERSION")]
    work_items: Vec<String>,
    /// The objective's text; the subject pins its raw SHA-256.
    #[arg(long, value_name = "FILE")]
    objective: PathBuf,
    /// The objective's revision label.
    #[arg(long, default_value = "1")]
    objective_revision: String,
    /// A resource as NAME=FILE, or NAME:KIND=FILE (kind `file` by default); the subject pins
    /// the file's raw SHA-256 (repeatable).
    #[arg(long = "resource", value_name = "NAME[:KIND]=FILE")]
    resources: Vec<String>,
    /// A check spec whose criteria the subject pins (repeatable).
    #[arg(long = "check", value_name = "SPEC")]
    checks: Vec<PathBuf>,
    /// A spec variable, as for `verdict check` (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
    /// A criterion no check bears on (judged by verifiers), as ID=TEXT (repeatable).
    #[arg(long = "criterion", value_name = "ID=TEXT")]
    criteria: Vec<String>,
    /// More criteria, as a JSON array of subject criteria (`id`, `text`, `required`, `role`,
    /// `weight`).
    #[arg(long, value_name = "FILE")]
    criteria_file: Option<String>,
    /// The criteria's revision label.
    #[arg(long, default_value = "1")]
    criteria_revision: String,
    /// The workflow revision label.
    #[arg(long, default_value = "1")]
    workflow_revision: String,
    /// Risk class.
    #[arg(long, default_value = "low", value_parser = ["low", "medium", "high", "critical"])]
    risk: String,
    /// The risk classification's revision label.
    #[arg(long, default_value = "1")]
    risk_revision: String,
    /// A capability the work touches (repeatable).
    #[arg(long = "capability")]
    capabilities: Vec<String>,
    /// Store it as the execution's current subject (needs the producer's token).
    #[arg(long)]
    put: bool,
    #[command(flatten)]
    common: PutOptions,
}

/// The store options of `subject new`, which only `--put` uses: given on the command line
/// without it, they would be ignored, so they are refused. From the environment
/// (`VERDICT_STORE`, `VERDICT_TOKEN`) they are left alone, as a shell sets those for every
/// command. `--server` is refused with or without `--put` (`crate::remote::refusal`).
struct PutOptions(Common);

/// The ids of [`Common`]'s arguments that only `--put` uses, with their flags.
const PUT_ONLY: [(&str, &str); 4] = [
    ("store", "--store"),
    ("token", "--token"),
    ("token_file", "--token-file"),
    ("now", "--now"),
];

impl clap::FromArgMatches for PutOptions {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let put = matches
            .try_get_one::<bool>("put")
            .ok()
            .flatten()
            .is_some_and(|p| *p);
        let given = PUT_ONLY.iter().find(|(id, _)| {
            matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
        });
        if let (false, Some((_, flag))) = (put, given) {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::MissingRequiredArgument,
                format!(
                    "{flag} is used only with --put: without it the subject is printed and no store is opened; give --put, or leave {flag} out\n"
                ),
            ));
        }
        Common::from_arg_matches(matches).map(Self)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
}

impl clap::Args for PutOptions {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        Common::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Common::augment_args_for_update(cmd)
    }
}

/// `result template`.
#[derive(clap::Subcommand)]
pub enum ResultScaffold {
    /// Print the skeleton of the result an admitted run submits for a request: one
    /// `not_tested` row per criterion of its subject, each prior blocker `still_present`.
    #[command(after_help = "Example:
  verdict result template sha256:... --run run-1 > result.json   # as the run's verifier
  # fill in each row's status, method and evidence_refs, then:
  verdict result submit result.json

A row left not_tested does not show its criterion holds, and a prior blocker left
still_present stays open.")]
    Template {
        /// The request digest (`verdict request create` prints it).
        request: String,
        /// The admitted run the result is for.
        #[arg(long)]
        run: String,
        #[command(flatten)]
        common: Common,
    },
}

fn file_digest(path: &std::path::Path) -> Result<Digest> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    crate::stream::sha256(file).with_context(|| format!("cannot read {}", path.display()))
}

fn resource(spec: &str) -> Result<ResourceInput> {
    let Some((left, file)) = spec.split_once('=') else {
        bail!("--resource {spec:?} must be NAME=FILE or NAME:KIND=FILE");
    };
    let (name, kind) = left.split_once(':').unwrap_or((left, "file"));
    Ok(ResourceInput {
        name: name.to_owned(),
        kind: kind.to_owned(),
        digest: file_digest(std::path::Path::new(file))
            .with_context(|| format!("--resource {spec:?}"))?,
        uri: None,
    })
}

fn work_item(spec: &str) -> Result<(String, String, String)> {
    let parsed = spec.split_once('=').and_then(|(kind, rest)| {
        rest.split_once('@')
            .map(|(id, version)| (kind.to_owned(), id.to_owned(), version.to_owned()))
    });
    parsed.ok_or_else(|| anyhow::anyhow!("--work-item {spec:?} must be KIND=ID@VERSION"))
}

fn criterion(spec: &str) -> Result<Criterion> {
    let Some((id, text)) = spec.split_once('=') else {
        bail!("--criterion {spec:?} must be ID=TEXT");
    };
    Ok(Criterion {
        id: id
            .parse()
            .map_err(|e| anyhow::anyhow!("--criterion {spec:?}: {e}"))?,
        text: text.to_owned(),
        required: true,
        role: verdict_core::contracts::CriterionRole::Correctness,
        weight: None,
    })
}

fn risk(text: &str) -> Result<RiskClass> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|e| anyhow::anyhow!("--risk {text:?}: {e}"))
}

/// Runs `subject new`.
pub async fn subject(cmd: SubjectScaffold) -> Result<ExitCode> {
    let SubjectScaffold::New(args) = cmd;
    let vars = crate::check_cmd::parse_vars(&args.vars)?;
    let mut specs = Vec::with_capacity(args.checks.len());
    for path in &args.checks {
        specs.push(
            verdict_probes::load::load_file(path, &vars)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
        );
    }
    let mut criteria = Vec::new();
    if let Some(file) = &args.criteria_file {
        let bytes = crate::input::read_all(file)?;
        let value =
            verdict_core::json::parse(&bytes).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        let more: Vec<Criterion> = verdict_core::contracts::decode_plain(&value)
            .map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        criteria.extend(more);
    }
    for c in &args.criteria {
        criteria.push(criterion(c)?);
    }
    let input = SubjectInput {
        execution: args.execution.clone(),
        generation: args.generation,
        mission: args.mission.clone(),
        producer: args.producer.clone(),
        producer_run: args.producer_run.clone(),
        work_items: args
            .work_items
            .iter()
            .map(|w| work_item(w))
            .collect::<Result<_>>()?,
        objective_revision: args.objective_revision.clone(),
        objective_digest: file_digest(&args.objective).context("--objective")?,
        criteria_revision: args.criteria_revision.clone(),
        criteria,
        resources: args
            .resources
            .iter()
            .map(|r| resource(r))
            .collect::<Result<_>>()?,
        specs,
        workflow_revision: args.workflow_revision.clone(),
        risk: risk(&args.risk)?,
        risk_revision: args.risk_revision.clone(),
        capabilities: args.capabilities.clone(),
    };
    let (subject, digest) = scaffold::subject(input)?;
    let value = serde_json::to_value(&subject)?;
    if args.put {
        let ctx = Ctx::open(&args.common.0).await?;
        let stored = ctx.engine.put_subject(&ctx.caller().await?, &value).await?;
        outln!("{stored}")?;
    } else {
        outln!("{}", serde_json::to_string_pretty(&value)?)?;
        eprintln!("subject digest {digest}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `result template`.
pub async fn result(cmd: ResultScaffold) -> Result<ExitCode> {
    let ResultScaffold::Template {
        request,
        run,
        common,
    } = cmd;
    let request: Digest = request
        .parse()
        .map_err(|e| anyhow::anyhow!("{request:?}: {e}"))?;
    let ctx = Ctx::open(&common).await?;
    let template = ctx
        .engine
        .result_template(&ctx.caller().await?, &request, &run)
        .await?;
    outln!("{}", serde_json::to_string_pretty(&template)?)?;
    Ok(ExitCode::SUCCESS)
}
