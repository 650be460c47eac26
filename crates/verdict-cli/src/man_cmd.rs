//! `verdict man --out DIR`: manual pages generated from the command definitions, one page for
//! `verdict` and one for every subcommand (`verdict-gate-evaluate.1`, ...).

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;

/// Write the manual pages (roff, section 1) into a directory.
#[derive(clap::Args)]
#[command(after_help = "Example:
  verdict man --out ~/.local/share/man/man1 && man verdict-gate-evaluate")]
pub struct Args {
    /// The directory to write into (created if missing); existing pages are replaced.
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    local: crate::remote::NoServer,
}

pub fn run(args: &Args, command: clap::Command) -> Result<ExitCode> {
    // Every page is rendered before the first is written, so a rendering failure leaves the
    // directory as it was; each file is then replaced whole.
    let mut command = command.disable_help_subcommand(true);
    command.build();
    let mut pages = Vec::new();
    render(&command, &mut pages)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    for (name, bytes) in &pages {
        let path = args.out.join(name);
        verdict_probes::evidence::write_atomic(&path, bytes)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    outln!("{} pages written to {}", pages.len(), args.out.display())?;
    Ok(ExitCode::SUCCESS)
}

fn render(command: &clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    // Every page names the package and version, not only the top one (subcommands carry none).
    let man = clap_mangen::Man::new(command.clone())
        .source(concat!("verdict ", env!("CARGO_PKG_VERSION")))
        .manual("verdict manual");
    let mut bytes = Vec::new();
    man.render(&mut bytes)
        .with_context(|| format!("cannot render the page of {}", man.get_filename()))?;
    pages.push((man.get_filename(), bytes));
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        render(sub, pages)?;
    }
    Ok(())
}
