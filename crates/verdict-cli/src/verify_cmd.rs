//! `verdict verify REQUEST`: run the model verifier for a stored verification request, as the
//! verifier principal whose token is given. A face over `Engine::verify_request`: it reads the
//! files, calls the use case once and prints one line per class.

use crate::lifecycle_cmd::{Common, Ctx};
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use verdict_core::contracts::VerificationStatus;
use verdict_core::digest::Digest;
use verdict_engine::{
    ClassOutcome, ClassRun, InputError, VerifyError, VerifyInputs, VerifyOptions,
};
use verdict_judge::cache::{FileCache, ResultCache};
use verdict_judge::config::VerifiersFile;

const HELP: &str = "\
The subject pins its objective and resources by digest only, so their bytes are given here:
--objective FILE must hash (raw SHA-256) to the subject's objective digest, and every resource
of the subject needs --resource NAME=FILE whose raw SHA-256 equals the pinned digest. Anything
missing, unknown or mismatched is refused before any run is admitted.

Per class: the run is admitted (as the caller), preflight runs first (when the deterministic
evidence already ends in rework or blocked, no model is called and the run records why), then
the judge runs, the context manifest is recorded with the run, and the result is submitted,
`unavailable` ones included; a result the engine refuses ends the run unavailable
(invalid_output) with the refusal as its reason. The request's budget lowers each class's own.
One line per class: class, run id, status, reason.

Cache: a class with `cache: true` (the default) reuses a valid result of an earlier run with
the same context digest (subject, generation, criteria, data, budget), provider, model and
parameters, instructions, sampling, reply schema and ref waivers, without calling the model.
Unavailable results are never cached. The cache is $VERDICT_HOME/judge-cache (else
./.verdict/judge-cache) or --cache-dir; delete it to clear it, or pass --no-cache.

Exit status: 0 when every class completed, 1 otherwise, 2 on bad input or a refusal.

Example:
  VERDICT_TOKEN=$REVIEWER verdict verify sha256:... --verifiers verifiers.yaml \\
      --objective objective.md --resource diff=change.diff --class reviewer";

/// Arguments of `verdict verify`.
#[derive(clap::Args)]
#[command(after_help = HELP)]
pub struct Args {
    /// The verification request's digest (from `verdict request create`).
    request: String,
    /// The verifiers file (JSON or YAML); template files are relative to it.
    #[arg(long)]
    verifiers: PathBuf,
    /// Run only these classes (each must be one the request asks for); default: all of them.
    #[arg(long = "class")]
    classes: Vec<String>,
    /// The objective text, whose raw SHA-256 must equal the subject's objective digest.
    #[arg(long)]
    objective: PathBuf,
    /// A subject resource's bytes, as NAME=FILE; the file's raw SHA-256 must equal the digest
    /// the subject pins for NAME.
    #[arg(long = "resource", value_name = "NAME=FILE")]
    resources: Vec<String>,
    /// Where valid results are cached for reuse (default `$VERDICT_HOME/judge-cache`, else
    /// `./.verdict/judge-cache`); delete the directory to clear it.
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    cache_dir: Option<PathBuf>,
    /// Neither read nor write the cache for this run.
    #[arg(long)]
    no_cache: bool,
    #[command(flatten)]
    common: Common,
}

/// Runs `verdict verify`.
pub fn run(args: &Args) -> Result<ExitCode> {
    crate::lifecycle_cmd::runtime()?.block_on(verify(args))
}

/// The files given, read: the objective's bytes and each `--resource NAME=FILE`'s.
struct Files {
    inputs: VerifyInputs,
    /// The file each resource name was read from, for messages.
    paths: BTreeMap<String, String>,
}

fn read_files(args: &Args) -> Result<Files> {
    let objective = std::fs::read(&args.objective)
        .map_err(|e| anyhow::anyhow!("--objective {}: {e}", args.objective.display()))?;
    let mut resources = Vec::new();
    let mut paths = BTreeMap::new();
    for g in &args.resources {
        let Some((name, path)) = g.split_once('=') else {
            bail!("--resource {g:?}: expected NAME=FILE");
        };
        let bytes =
            std::fs::read(path).map_err(|e| anyhow::anyhow!("--resource {name}={path}: {e}"))?;
        paths.insert(name.to_owned(), path.to_owned());
        resources.push((name.to_owned(), bytes));
    }
    Ok(Files {
        inputs: VerifyInputs {
            objective,
            resources,
        },
        paths,
    })
}

/// An input the engine refused, said in terms of this command's flags.
fn input_message(e: &InputError, args: &Args, files: &Files) -> String {
    let objective = args.objective.display();
    let path = |name: &str| files.paths.get(name).map_or("?", String::as_str);
    match e {
        InputError::UnaskedClass { class, asked } => {
            format!("--class {class:?}: the request asks for {asked:?} only")
        }
        InputError::NoClass => e.to_string(),
        InputError::ObjectiveNotText => format!("--objective {objective}: not UTF-8 text"),
        InputError::ObjectiveMismatch { actual, pinned } => format!(
            "--objective {objective}: hashes to {actual}, not the subject's objective digest {pinned}"
        ),
        InputError::UnknownResource { name } => {
            format!("--resource {name:?}: the subject has no resource of that name")
        }
        InputError::DuplicateResource { name } => format!("--resource {name:?} is given twice"),
        InputError::MissingResource { name } => format!(
            "resource {name:?} of the subject has no retrievable content here: give --resource {name}=FILE"
        ),
        InputError::ResourceMismatch {
            name,
            actual,
            pinned,
        } => format!(
            "--resource {name}={}: hashes to {actual}, not the pinned {pinned}",
            path(name)
        ),
    }
}

/// The line a class's run ends with: `class run-id status reason`.
fn line(run: &ClassRun) -> String {
    let (class, run_id) = (&run.class, &run.run_id);
    match &run.outcome {
        ClassOutcome::Skipped(pre) => format!(
            "{class} {run_id} skipped preflight {}: {}",
            pre.outcome.as_str(),
            pre.reasons.join("; ")
        ),
        ClassOutcome::Submitted(s) => format!("{class} {run_id} submitted {}", s.digest),
        ClassOutcome::Judged(j) => {
            let status = if j.status == VerificationStatus::Completed {
                "completed"
            } else {
                "unavailable"
            };
            let mut reason = match (j.reason, &j.detail) {
                (Some(r), Some(d)) => format!("{}: {d}", r.as_str()),
                (Some(r), None) => r.as_str().to_owned(),
                (None, _) => "-".to_owned(),
            };
            if let Some(why) = j.submitted.as_ref().and_then(|s| s.why_not.as_ref()) {
                reason = format!("{reason} (not counted: {why})");
            }
            format!("{class} {run_id} {status} {reason}")
        }
    }
}

async fn verify(args: &Args) -> Result<ExitCode> {
    crate::remote::refuse_remote(
        &args.common,
        "a model verifier runs where its model and its provider's credentials are, on a store opened there",
    )?;
    let ctx = Ctx::open(&args.common).await?;
    let caller = ctx.caller().await?;
    let request: Digest = args
        .request
        .parse()
        .map_err(|e| anyhow::anyhow!("{:?}: {e}", args.request))?;
    let files = read_files(args)?;
    let verifiers = VerifiersFile::load(&args.verifiers)?;
    let base = args.verifiers.parent().unwrap_or_else(|| Path::new("."));
    let classes = |name: &str| verifiers.class(name, base).map_err(|e| e.to_string());
    let cache: Option<Arc<dyn ResultCache>> = if args.no_cache {
        None
    } else {
        Some(Arc::new(FileCache::new(cache_dir(
            args.cache_dir.as_deref(),
        ))))
    };
    let options = VerifyOptions {
        classes: args.classes.clone(),
        cache,
        ..VerifyOptions::default()
    };
    // Each class's line is printed as soon as its run ends; the first failed write is kept
    // and reported once the runs have ended.
    let mut written = Ok(());
    let mut all_completed = true;
    let ran = ctx
        .engine
        .verify_request_each(
            &caller,
            &request,
            &files.inputs,
            &classes,
            &options,
            &mut |run: &ClassRun| {
                all_completed &= run.completed();
                if let ClassOutcome::Judged(j) = &run.outcome
                    && let Some(key) = &j.cache_key
                {
                    eprintln!(
                        "{} {}: result reused from the cache ({key})",
                        run.class, run.run_id
                    );
                }
                if written.is_ok() {
                    written = outln!("{}", line(run));
                }
            },
        )
        .await;
    match ran {
        Ok(_) => {}
        Err(VerifyError::Input(e)) => bail!(input_message(&e, args, &files)),
        Err(e) => return Err(e.into()),
    }
    written?;
    Ok(if all_completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The cache directory: `--cache-dir`, else `$VERDICT_HOME/judge-cache`, else
/// `./.verdict/judge-cache` (next to the default store).
fn cache_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_owned();
    }
    let home = std::env::var_os(verdict_store::location::HOME_ENV)
        .filter(|h| !h.is_empty())
        .map_or_else(|| PathBuf::from(".verdict"), PathBuf::from);
    home.join("judge-cache")
}
