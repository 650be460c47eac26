//! `verdict gate ...`: evaluating bundles with the pure Gate.

use crate::input;
use anyhow::Result;
use std::fmt::Write as _;
use std::process::ExitCode;
use verdict_core::contracts::{FindingRef, GateDecision, Outcome};
use verdict_core::gate;

/// Gate commands.
#[derive(clap::Subcommand)]
pub enum GateCommand {
    /// Evaluate one gate bundle and print the decision.
    ///
    /// Exit status: 0 on pass; 1 on any other outcome (a bundle that breaks the contract still
    /// prints a decision, with outcome blocked and reason invalid_input); 2 when the input cannot
    /// be read or the arguments are wrong.
    #[command(
        after_help = "Examples:\n  verdict gate evaluate examples/merge-gate/bundle.json\n  verdict gate evaluate --format text - < bundle.json"
    )]
    Evaluate(EvaluateArgs),
    /// Build an execution's bundle from the store, evaluate it and store the decision.
    Run(crate::lifecycle_cmd::GateRunArgs),
    /// Rebuild a stored decision's bundle and reproduce its bytes exactly.
    Replay(crate::lifecycle_cmd::GateReplayArgs),
}

/// Arguments of `verdict gate evaluate`.
#[derive(clap::Args)]
pub struct EvaluateArgs {
    /// The bundle file, or `-` for standard input.
    #[arg(default_value = "-")]
    file: String,
    /// Output format: json (canonical, byte-identical for the same inputs) or text.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
    #[command(flatten)]
    local: crate::remote::NoServer,
}

/// Output format.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// The decision document in canonical JSON.
    Json,
    /// A summary for people.
    Text,
}

pub fn run(cmd: GateCommand) -> Result<ExitCode> {
    match cmd {
        GateCommand::Evaluate(args) => evaluate(&args),
        GateCommand::Run(args) => crate::lifecycle_cmd::gate_run(&args),
        GateCommand::Replay(args) => crate::lifecycle_cmd::gate_replay(&args),
    }
}

fn evaluate(args: &EvaluateArgs) -> Result<ExitCode> {
    let bytes = input::read_all(&args.file)?;
    let decision = gate::evaluate(&bytes);
    print_decision(&decision, args.format)?;
    Ok(exit_code(decision.outcome))
}

/// 0 on pass, 1 otherwise.
pub fn exit_code(outcome: Outcome) -> ExitCode {
    if outcome == Outcome::Pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Prints a decision in the chosen format.
pub fn print_decision(d: &GateDecision, format: Format) -> Result<()> {
    let bytes = match format {
        Format::Json => {
            let mut b = d.canonical_bytes()?;
            b.push(b'\n');
            b
        }
        Format::Text => text(d).into_bytes(),
    };
    crate::out::write_all(&bytes)
}

fn opt<T: std::fmt::Display>(v: Option<&T>) -> String {
    v.map_or_else(|| "-".to_owned(), ToString::to_string)
}

fn score(v: Option<f64>) -> String {
    v.map_or_else(|| "null".to_owned(), |x| format!("{x:.3}"))
}

fn refs(out: &mut String, title: &str, list: &[FindingRef]) {
    if list.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}");
    for f in list {
        let _ = writeln!(out, "  {} v{} (criterion {})", f.id, f.version, f.criterion);
    }
}

/// The readable summary: outcome, criteria table, reasons, rework and follow-ups.
pub fn text(d: &GateDecision) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "outcome   {}", d.outcome.as_str());
    let _ = writeln!(out, "subject   {}", opt(d.subject_digest.as_ref()));
    let _ = writeln!(out, "policy    {}", opt(d.policy_digest.as_ref()));
    let _ = writeln!(out, "key       {}", opt(d.evaluation_key.as_ref()));
    if let Some(v) = &d.valid_until {
        let _ = writeln!(out, "valid     until {v}");
    }
    if !d.criteria.is_empty() {
        let w = d
            .criteria
            .iter()
            .map(|c| c.id.as_str().len())
            .max()
            .unwrap_or(0)
            .max(9);
        let _ = writeln!(
            out,
            "\n{:<w$}  {:<8}  {:<12}  sources",
            "criterion", "required", "status"
        );
        for c in &d.criteria {
            let sources: Vec<String> = c
                .sources
                .iter()
                .map(|s| format!("{} {}", s.reference, s.status.as_str()))
                .collect();
            let _ = writeln!(
                out,
                "{:<w$}  {:<8}  {:<12}  {}",
                c.id.as_str(),
                if c.required { "yes" } else { "no" },
                c.status.as_str(),
                if sources.is_empty() {
                    "-".to_owned()
                } else {
                    sources.join(", ")
                }
            );
        }
    }
    if !d.reasons.is_empty() {
        let _ = writeln!(out, "\nreasons");
        for r in &d.reasons {
            let _ = writeln!(
                out,
                "  [{}] {}: {}",
                r.outcome.as_str(),
                r.code.as_str(),
                r.detail
            );
        }
    }
    refs(&mut out, "rework", &d.rework);
    refs(
        &mut out,
        "unresolved prior blockers",
        &d.unresolved_prior_blockers,
    );
    refs(
        &mut out,
        "follow-ups (separate triage; never change the outcome)",
        &d.follow_ups,
    );
    let s = &d.scores;
    let _ = writeln!(
        out,
        "\nscores    c={} rec_v={} cat_v={}",
        score(s.c),
        score(s.rec_v),
        score(s.cat_v)
    );
    out
}
