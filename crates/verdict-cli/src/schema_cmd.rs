//! `verdict schema NAME`: the JSON Schema of a contract document.

use anyhow::{Result, bail};
use std::process::ExitCode;
use verdict_core::schema;

/// Print the JSON Schema (draft 2020-12) of a contract document.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  verdict schema bundle > gate-bundle.schema.json")]
pub struct Args {
    /// One of: bundle, subject, policy, decision, evidence, verification.
    name: String,
}

pub fn run(args: &Args) -> Result<ExitCode> {
    let Some(s) = schema::schema(&args.name) else {
        bail!(
            "unknown schema {:?}; expected one of {}",
            args.name,
            schema::NAMES.join(", ")
        );
    };
    outln!("{}", serde_json::to_string_pretty(&s)?)?;
    Ok(ExitCode::SUCCESS)
}
