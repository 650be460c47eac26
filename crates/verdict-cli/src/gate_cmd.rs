//! Placeholder.
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum GateCommand {
    /// Evaluate.
    Evaluate,
}

pub fn run(_: GateCommand) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
