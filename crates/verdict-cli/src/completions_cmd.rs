//! `verdict completions SHELL`: a completion script generated from the command definitions, so
//! it can never name a command or an option the binary does not have.

use anyhow::Result;
use std::process::ExitCode;

/// Print a shell completion script for verdict.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  verdict completions bash > ~/.local/share/bash-completion/completions/verdict
  verdict completions zsh > ~/.zfunc/_verdict        # with fpath+=(~/.zfunc) before compinit
  verdict completions fish > ~/.config/fish/completions/verdict.fish")]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
    #[command(flatten)]
    local: crate::remote::NoServer,
}

pub fn run(args: &Args, mut command: clap::Command) -> Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "verdict", &mut script);
    crate::out::write_all(&script)?;
    Ok(ExitCode::SUCCESS)
}
