//! `verdict judge ...`: the model verifier, seen from outside. `render` prints exactly what a
//! model would be shown for a request, and the context manifest recorded with the run, without
//! calling any provider or needing any key.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use verdict_judge::config::{Budget, VerifiersFile};
use verdict_judge::render::Nonce;

const RENDER_HELP: &str = "\
Exit status: 0 when rendered; 1 when a required item does not fit the budget (the manifest is
printed, the prompt is not, since no model would be called); 2 when an input cannot be read or
breaks its rules.

Examples:
  verdict judge render request.json
  verdict judge render request.json --verifiers verifiers.yaml --class security
  verdict judge render request.json --nonce 00112233445566778899aabbccddeeff --format json";

/// Model verifier commands.
#[derive(clap::Subcommand)]
pub enum JudgeCommand {
    /// Print the rendered prompt and the context manifest for a request file.
    #[command(after_help = RENDER_HELP)]
    Render(RenderArgs),
}

/// Arguments of `verdict judge render`.
#[derive(clap::Args)]
pub struct RenderArgs {
    /// The request file (`verdict.judge-request/v1`); content files it names are relative to it.
    request: PathBuf,
    /// A verifiers file (JSON or YAML) giving the class's template and budget; without one, the
    /// built-in reviewer template and the default budget are used.
    #[arg(long)]
    verifiers: Option<PathBuf>,
    /// The verifier class to render for (default: the request's).
    #[arg(long)]
    class: Option<String>,
    /// Use this nonce (32 lowercase hex digits) instead of a fresh random one, for output that
    /// can be compared byte for byte.
    #[arg(long)]
    nonce: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[command(flatten)]
    local: crate::remote::NoServer,
}

/// Output format.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Headed sections for people.
    Text,
    /// One JSON document: context digest, manifest, and the system and user messages.
    Json,
}

pub fn run(cmd: JudgeCommand) -> Result<ExitCode> {
    match cmd {
        JudgeCommand::Render(args) => render(&args),
    }
}

fn render(args: &RenderArgs) -> Result<ExitCode> {
    let mut request = verdict_judge::request_file::load(&args.request)?;
    if let Some(class) = &args.class {
        request.verifier.class = class
            .parse()
            .with_context(|| format!("--class {class:?}"))?;
    }
    let (template, budget_tokens) = match &args.verifiers {
        Some(path) => {
            let file = VerifiersFile::load(path)?;
            let base = path.parent().unwrap_or_else(|| Path::new("."));
            let class = file.class(request.verifier.class.as_str(), base)?;
            (class.template, class.config.budget.context_tokens)
        }
        None => (
            verdict_judge::template::builtin("reviewer")
                .unwrap_or_default()
                .to_owned(),
            Budget::default().context_tokens,
        ),
    };
    let plan = verdict_judge::judge::plan_with(&template, budget_tokens, &request)?;
    let nonce = match &args.nonce {
        Some(n) => Nonce::from_hex(n)?,
        None => Nonce::random()?,
    };
    let manifest = plan.manifest.to_value();
    let prompt = plan.incomplete.is_none().then(|| plan.render(&nonce));
    match args.format {
        Format::Json => {
            let doc = serde_json::json!({
                "context_digest": plan.digest,
                "complete": plan.manifest.complete,
                "incomplete": plan.incomplete,
                "manifest": manifest,
                "nonce": prompt.as_ref().map(|p| p.nonce.as_str()),
                "system": prompt.as_ref().map(|p| &p.system),
                "user": prompt.as_ref().map(|p| &p.user),
            });
            outln!("{}", serde_json::to_string_pretty(&doc)?)?;
        }
        Format::Text => {
            outln!("context digest: {}", plan.digest)?;
            outln!(
                "estimated tokens: {} of a {}-token budget",
                plan.manifest.construction.estimated_tokens,
                budget_tokens
            )?;
            outln!(
                "== manifest ==\n{}",
                serde_json::to_string_pretty(&manifest)?
            )?;
            if let Some(p) = &prompt {
                outln!("== system ==\n{}", p.system)?;
                outln!("== user ==\n{}", p.user)?;
            }
        }
    }
    if let Some(why) = &plan.incomplete {
        eprintln!("verdict: context incomplete: {why}");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
