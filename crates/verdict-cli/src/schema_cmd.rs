//! `verdict schema NAME`: the JSON Schema of a contract document, of one of the engine's own
//! documents (request, admission note, run context), of one of the store's own records
//! (`store.principal`, `store.audit-event`, ...), of the verifiers file, or of a check spec.

use anyhow::{Result, bail};
use std::process::ExitCode;
use verdict_core::schema;

/// Print the JSON Schema (draft 2020-12) of a contract document.
#[derive(clap::Args)]
#[command(after_help = "Example:\n  verdict schema bundle > gate-bundle.schema.json")]
pub struct Args {
    /// One of: bundle, subject, policy, decision, evidence, verification, request,
    /// admission-note, run-context, verifiers, check-spec, or a store record: store.principal,
    /// store.credential-change, store.grant, store.grant-revocation, store.verifier-run,
    /// store.run-event, store.pointer-change, store.gate-evaluation, store.denial, store.blob,
    /// store.blob-holder, store.audit-event.
    name: String,
    #[command(flatten)]
    local: crate::remote::NoServer,
}

/// The verifiers file `verdict verify --verifiers` reads.
const VERIFIERS: &str = "verifiers";
/// A check spec `verdict check` reads.
const CHECK_SPEC: &str = "check-spec";

pub fn run(args: &Args) -> Result<ExitCode> {
    let found = match args.name.as_str() {
        VERIFIERS => Some(verdict_judge::config::verifiers_schema()),
        CHECK_SPEC => Some(verdict_probes::schema::check_spec_schema()),
        name => schema::schema(name)
            .or_else(|| verdict_engine::document_schema(name))
            .or_else(|| verdict_store::schema::record_schema(name)),
    };
    let Some(s) = found else {
        bail!(
            "unknown schema {:?}; expected one of {}, {}, {VERIFIERS}, {CHECK_SPEC}, {}",
            args.name,
            schema::NAMES.join(", "),
            verdict_engine::DOCUMENT_NAMES.join(", "),
            verdict_store::schema::record_names().join(", ")
        );
    };
    outln!("{}", serde_json::to_string_pretty(&s)?)?;
    Ok(ExitCode::SUCCESS)
}
