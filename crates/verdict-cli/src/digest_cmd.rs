//! Placeholder.
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_: &Args) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
