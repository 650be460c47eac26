//! `verdict attest DECISION` and `verdict attest verify FILE --key PUB`: a stored decision as
//! signed in-toto statements, and the check of such a file without the database.

use crate::lifecycle_cmd::{Common, Ctx, runtime};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use verdict_core::contracts::Timestamp;
use verdict_core::digest::Digest;

const AFTER: &str = "Examples:
  verdict attest sha256:... --key attest.key --out decision.intoto.jsonl
  verdict attest verify decision.intoto.jsonl --key attest.pub

The file holds one DSSE envelope per line: the decision's SLSA verification summary, then one
in-toto test result per check evidence the Gate counted. Verify exits
  0  only for a verified PASSED attestation, from a store on a real clock, still valid now
     (before its valid_until, when it has one);
  1  verified, but not a pass to rely on: FAILED, expired, made on a store with a manual
     clock (unless --allow-manual-clock), or about another subject, gate or policy than
     --subject, --gate or --policy pin; the output says which;
  2  unverifiable: a signature, the payload type or the content does not check, or the file
     or a key cannot be read.";

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
        /// Accept a decision made on a store with a manual clock (tests and simulations),
        /// whose time the caller chose.
        #[arg(long)]
        allow_manual_clock: bool,
        /// The instant to judge `valid_until` at (RFC 3339, UTC); default: this machine's
        /// clock.
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
        /// The subject (its verification digest) the file must be about: a pass for another
        /// subject exits 1.
        #[arg(long, value_name = "DIGEST")]
        subject: Option<Digest>,
        /// The gate whose decision the file must be: a pass under another gate's (more
        /// lenient) policy exits 1.
        #[arg(long, value_name = "NAME")]
        gate: Option<String>,
        /// The policy (its digest) the decision must have been made under.
        #[arg(long, value_name = "DIGEST")]
        policy: Option<Digest>,
        #[command(flatten)]
        local: crate::remote::NoServer,
    },
}

/// Runs `verdict attest`.
pub fn run(args: &Args) -> Result<ExitCode> {
    if let Some(AttestCommand::Verify {
        file,
        keys,
        json,
        allow_manual_clock,
        at,
        subject,
        gate,
        policy,
        ..
    }) = &args.verify
    {
        let pins = verdict_attest::Pins {
            subject_digest: subject.clone(),
            gate: gate.clone(),
            policy_digest: policy.clone(),
        };
        return verify(file, keys, *json, *allow_manual_clock, at.as_deref(), &pins);
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

/// This machine's clock, as a timestamp: the relying party's own instant, not a store's.
fn local_now() -> Result<Timestamp> {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("this machine's clock is before 1970")?;
    Ok(Timestamp::from_unix_nanos(
        i128::try_from(since.as_nanos()).context("this machine's clock is out of range")?,
    ))
}

/// What `attest verify --json` prints: the verified report and how it was judged.
#[derive(serde::Serialize)]
struct Judged<'a> {
    #[serde(flatten)]
    report: &'a verdict_attest::Report,
    /// The instant `valid_until` was judged at.
    judged_at: &'a Timestamp,
    /// Why it is not a pass to rely on; empty when it is.
    refusals: Vec<verdict_attest::Refusal>,
}

fn verify(
    file: &std::path::Path,
    keys: &[PathBuf],
    json: bool,
    allow_manual_clock: bool,
    at: Option<&str>,
    pins: &verdict_attest::Pins,
) -> Result<ExitCode> {
    let trusted = keys
        .iter()
        .map(|k| crate::key_cmd::read_public(k))
        .collect::<Result<Vec<_>>>()?;
    let now = match at {
        Some(t) => t.parse().map_err(|e| anyhow::anyhow!("--at {t:?}: {e}"))?,
        None => local_now()?,
    };
    let bytes = std::fs::read(file).with_context(|| format!("{}", file.display()))?;
    let report = match verdict_attest::verify(&bytes, &trusted) {
        Ok(report) => report,
        Err(e) => {
            outln!("unverifiable: {e}")?;
            return Ok(ExitCode::from(2));
        }
    };
    let mut refusals = report.refusals(&now, allow_manual_clock);
    refusals.extend(report.unpinned(pins));
    if json {
        let judged = Judged {
            report: &report,
            judged_at: &now,
            refusals: refusals.clone(),
        };
        outln!("{}", serde_json::to_string_pretty(&judged)?)?;
    } else {
        let verdict = if refusals.is_empty() {
            "valid".to_owned()
        } else {
            let why: Vec<String> = refusals.iter().map(ToString::to_string).collect();
            format!("verified but not a pass to rely on ({})", why.join("; "))
        };
        outln!(
            "{verdict}: {} ({}) for subject {}, gate {:?} under policy {}, evaluation key {}; decided at {} on a {} clock; valid_until {}; {} counted check result(s); {}",
            report.verification_result,
            report.outcome.as_str(),
            report.subject_digest,
            report.gate,
            report.policy_digest,
            report.evaluation_key,
            report.time_verified,
            report.clock.as_str(),
            report.valid_until.as_ref().map_or_else(
                || "none (no time-sensitive evidence)".to_owned(),
                ToString::to_string
            ),
            report.test_results,
            if report.replayed {
                "the embedded bundle reproduces the decision"
            } else {
                "no bundle embedded: the decision was not re-evaluated"
            }
        )?;
    }
    Ok(if refusals.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
