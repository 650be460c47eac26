//! `verdict ledger`: the reliability ledger of every execution in the store, as a table, JSON
//! or CSV, with an SVG chart per cohort if asked. With `--server` the server computes it and
//! this renders it, as it renders one computed here.

use crate::lifecycle_cmd::{Common, Ctx, runtime};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use verdict_engine::ledger::{DEFAULT_WINDOW, Ledger, Window};

/// How to print the ledger.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Table,
    Json,
    Csv,
}

/// `verdict ledger`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  verdict ledger
  verdict ledger --attempts 50 --days 30 --min-sample 20 --format csv
  verdict ledger --format json --svg-dir review/ledger

One observation per attempt (execution generation); only the decision that applies to it
counts. Rates with no attempts to rate are null; a cohort below the minimum sample is
insufficient_evidence. The ledger covers every execution, so only an operator reads it.
See docs/ledger.md.")]
pub struct Args {
    /// At most this many of each cohort's most recent attempts.
    #[arg(long, default_value_t = DEFAULT_WINDOW.attempts)]
    attempts: usize,
    /// Only attempts of the last this many days.
    #[arg(long, default_value_t = DEFAULT_WINDOW.days)]
    days: u64,
    /// Fewer attempts than this is insufficient evidence.
    #[arg(long, default_value_t = DEFAULT_WINDOW.min_sample)]
    min_sample: usize,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Write one SVG chart per cohort (rate and lower bound over the window) into this folder.
    #[arg(long, value_name = "DIR")]
    svg_dir: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

/// Runs `verdict ledger`.
pub fn run(args: &Args) -> Result<ExitCode> {
    runtime()?.block_on(async {
        let window = Window {
            attempts: args.attempts,
            days: args.days,
            min_sample: args.min_sample,
        };
        let ledger: Ledger = if let Some(remote) = crate::remote::client(&args.common)? {
            remote
                .get(&format!(
                    "v1/ledger?attempts={}&days={}&min_sample={}",
                    window.attempts, window.days, window.min_sample
                ))
                .await?
        } else {
            let ctx = Ctx::open(&args.common).await?;
            ctx.engine.ledger(&ctx.caller().await?, window).await?
        };
        match args.format {
            Format::Table => crate::out::write_all(ledger.to_table().as_bytes())?,
            Format::Json => outln!("{}", serde_json::to_string_pretty(&ledger)?)?,
            Format::Csv => crate::out::write_all(ledger.to_csv().as_bytes())?,
        }
        if let Some(dir) = &args.svg_dir {
            std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
            for (i, cohort) in ledger.cohorts.iter().enumerate() {
                let path = dir.join(format!("cohort-{:03}.svg", i + 1));
                crate::audit_cmd::write_out(Some(&path), cohort.to_svg().as_bytes())?;
                eprintln!("{}: {}", path.display(), cohort.key.label());
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
