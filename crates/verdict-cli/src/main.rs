//! The `verdict` binary: one face over the crates of the workspace.
//!
//! Each command lives in its own module with a `clap::Args` struct and a `run` function that
//! returns the process exit code; this file only dispatches.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod digest_cmd;
mod gate_cmd;
mod input;
mod schema_cmd;

/// verdict: independent verification with a deterministic Gate.
#[derive(Parser)]
#[command(name = "verdict", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate gate bundles.
    #[command(subcommand)]
    Gate(gate_cmd::GateCommand),
    /// Print the digest of a JSON document or a raw file.
    Digest(digest_cmd::Args),
    /// Print the JSON Schema of a contract document.
    Schema(schema_cmd::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Gate(cmd) => gate_cmd::run(cmd),
        Command::Digest(args) => digest_cmd::run(&args),
        Command::Schema(args) => schema_cmd::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("verdict: {e:#}");
            ExitCode::from(2)
        }
    }
}
