//! `verdict attest DECISION` and `verdict attest verify FILE --key PUB`: a stored decision as
//! signed in-toto statements, and the check of such a file without the database.

use crate::lifecycle_cmd::{Common, Ctx, runtime};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use verdict_core::digest::Digest;

const AFTER: &str = "Examples:
  verdict attest sha256:... --key attest.key --out decision.intoto.jsonl
  verdict attest verify decision.intoto.jsonl --key attest.pub

The file holds one DSSE envelope per line: the decision's SLSA verification summary, then one
in-toto test result per check evidence. Verify exits 0 when every envelope is signed by a given
key and says what its decision says (the embedded bundle, if any, re-evaluated), 1 when not,
2 when the file or a key cannot be read.";

/// `verdict attest`.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true, after_help = AFTER)]
pub struct Args {
    #[command(subcommand)]
    verify: Option<AttestCommand>,
    /// The decision's evaluation key.
    #[arg(required = true)]
    decision: Option<String>,
    /// The signing key file (`verdict key generate`).
    #[arg(long, value_name = "FILE", required = true)]
    key: Option<PathBuf>,
    /// Where to write the attestation (default: standard output).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Leave the gate bundle out (a verifier then cannot re-evaluate the decision).
    #[arg(long)]
    no_bundle: bool,
    #[command(flatten)]
    common: Common,
}

/// `verdict attest verify`.
#[derive(clap::Subcommand)]
enum AttestCommand {
    /// Check an attestation file against trusted public keys.
    Verify {
        /// The attestation file.
        file: PathBuf,
        /// A trusted public key file; give several to accept files signed before a rotation.
        #[arg(long = "key", value_name = "PUB", required = true)]
        keys: Vec<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        local: crate::remote::NoServer,
    },
}

/// Runs `verdict attest`.
pub fn run(args: &Args) -> Result<ExitCode> {
    if let Some(AttestCommand::Verify {
        file, keys, json, ..
    }) = &args.verify
    {
        return verify(file, keys, *json);
    }
    // Refused before the key file is read: it is never sent anywhere.
    crate::remote::refuse_remote(
        &args.common,
        "it signs with a key file kept here, and a signing key never leaves the machine it is kept on",
    )?;
    let (Some(decision), Some(key)) = (&args.decision, &args.key) else {
        anyhow::bail!("give the decision's evaluation key and --key");
    };
    let evaluation_key: Digest = decision
        .parse()
        .map_err(|e| anyhow::anyhow!("{decision:?}: {e}"))?;
    let signer = verdict_store::checkpoint::read_key_file(key)
        .with_context(|| format!("{}", key.display()))?;
    runtime()?.block_on(async {
        let ctx = Ctx::open(&args.common).await?;
        let caller = ctx.caller().await?;
        let attested = ctx
            .engine
            .attest(&caller, &evaluation_key, &signer, !args.no_bundle)
            .await?;
        crate::audit_cmd::write_out(args.out.as_deref(), attested.jsonl.as_bytes())?;
        eprintln!(
            "attested {} ({}) with key {}: {} envelope(s)",
            attested.record.evaluation_key,
            attested.record.outcome.as_str(),
            attested.record.key_id,
            attested.record.envelopes.len()
        );
        Ok(ExitCode::SUCCESS)
    })
}

fn verify(file: &std::path::Path, keys: &[PathBuf], json: bool) -> Result<ExitCode> {
    let trusted = keys
        .iter()
        .map(|k| crate::key_cmd::read_public(k))
        .collect::<Result<Vec<_>>>()?;
    let bytes = std::fs::read(file).with_context(|| format!("{}", file.display()))?;
    match verdict_attest::verify(&bytes, &trusted) {
        Ok(report) => {
            if json {
                outln!("{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                outln!(
                    "valid: {} ({}) for subject {}, evaluation key {}; {} check result(s); {}",
                    report.verification_result,
                    report.outcome.as_str(),
                    report.subject_digest,
                    report.evaluation_key,
                    report.test_results,
                    if report.replayed {
                        "the embedded bundle reproduces the decision"
                    } else {
                        "no bundle embedded: the decision was not re-evaluated"
                    }
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            outln!("invalid: {e}")?;
            Ok(ExitCode::from(1))
        }
    }
}
