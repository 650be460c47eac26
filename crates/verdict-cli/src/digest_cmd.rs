//! `verdict digest`: the digest of a JSON document under a kind, or of a raw file.

use crate::input;
use anyhow::{Context, Result, bail};
use std::process::ExitCode;
use verdict_core::digest::{self, DigestKind};

/// Print the digest of a JSON document (`--kind`) or of raw bytes (`--raw`).
///
/// With `--kind`, the document is read by the strict reader (no schema check) and hashed as
/// `digest(kind, doc)`; a carried `"digest"` field is left out of the hash and checked: a
/// mismatch prints the real digest and exits 1.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  verdict digest --kind subject subject.json\n  cat policy.json | verdict digest --kind policy -\n  verdict digest --raw build/artifact.tar"
)]
pub struct Args {
    /// Document kind: subject, policy, evidence, verification, finding, human-decision,
    /// evidence-set, evaluation, context, decision, request.
    #[arg(long, required_unless_present = "raw", conflicts_with = "raw")]
    kind: Option<String>,
    /// Hash the raw bytes of the input (streaming), not a JSON document.
    #[arg(long)]
    raw: bool,
    /// Input file, or `-` for standard input.
    #[arg(default_value = "-")]
    file: String,
    #[command(flatten)]
    local: crate::remote::NoServer,
}

pub fn run(args: &Args) -> Result<ExitCode> {
    if args.raw {
        let d = raw_digest(&args.file)?;
        outln!("{d}")?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(kind) = &args.kind else {
        bail!("either --kind or --raw is required");
    };
    let kind: DigestKind = kind.parse()?;
    let bytes = input::read_all(&args.file)?;
    let doc = verdict_core::json::parse(&bytes)
        .with_context(|| format!("{} is not strict json", args.file))?;
    match digest::verify_carried(kind, &doc) {
        Ok(d) => {
            outln!("{d}")?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            outln!("{}", digest::digest(kind, &doc))?;
            eprintln!("verdict: {}: {e}", args.file);
            Ok(ExitCode::from(1))
        }
    }
}

/// Streams a file (or stdin) through SHA-256.
pub fn raw_digest(path: &str) -> Result<digest::Digest> {
    let d = if path == "-" {
        crate::stream::sha256(std::io::stdin())
    } else {
        let f = std::fs::File::open(path).with_context(|| format!("cannot open {path}"))?;
        crate::stream::sha256(f)
    };
    d.with_context(|| format!("cannot read {path}"))
}
