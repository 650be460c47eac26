//! `verdict schema NAME`: the JSON Schema of a contract document, or of the verifiers file.

use anyhow::{Result, bail};
use std::process::ExitCode;
use verdict_core::schema;

/// Print the JSON Schema (draft 2020-12) of a contract document.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  verdict schema bundle > gate-bundle.schema.json")]
pub struct Args {
    /// One of: bundle, subject, policy, decision, evidence, verification, verifiers.
    name: String,
}

/// The verifiers file `verdict verify --verifiers` reads.
const VERIFIERS: &str = "verifiers";

pub fn run(args: &Args) -> Result<ExitCode> {
    let found = if args.name == VERIFIERS {
        Some(verdict_judge::config::verifiers_schema())
    } else {
        schema::schema(&args.name)
    };
    let Some(s) = found else {
        bail!(
            "unknown schema {:?}; expected one of {}, {VERIFIERS}",
            args.name,
            schema::NAMES.join(", ")
        );
    };
    outln!("{}", serde_json::to_string_pretty(&s)?)?;
    Ok(ExitCode::SUCCESS)
}
