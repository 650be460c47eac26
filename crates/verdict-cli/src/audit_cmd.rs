//! `verdict audit`: check the store's audit chain, and sign and check checkpoints of it.

use anyhow::{Context as _, bail};
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use verdict_store::{AuditEvent, ChainHead, Checkpoint, Location, checkpoint};

const STORE_HELP: &str = "Store: sqlite:PATH or postgres://USER@HOST:PORT/DB \
    [default: $VERDICT_STORE, else $VERDICT_HOME/verdict.db, else ./.verdict/verdict.db]";

/// Audit commands.
#[derive(clap::Subcommand)]
pub enum AuditCommand {
    /// Walk the audit chain, re-hash every stored row and replay every stored decision; exit 1
    /// if anything was changed.
    #[command(after_help = "Examples:\n  \
        verdict audit verify\n  \
        verdict audit verify --store postgres://postgres@db/verdict --json\n  \
        verdict audit verify --checkpoint head.json --public-key 3b6a27bc...\n\n\
        Every problem names the audit seq and the table: a modified, deleted, inserted or \
        reordered row or event, a stored document whose bytes no longer hash to its key, a \
        pointer no audited change set, a chain that no longer holds a signed checkpoint's \
        head, or a stored decision the Gate does not reproduce from its evaluation record. Exit status: 0 intact, 1 problems found, 2 could not check.")]
    Verify(VerifyArgs),
    /// Sign the chain's current head with an ed25519 key and write the checkpoint.
    #[command(after_help = "Examples:\n  \
        verdict audit keygen --out audit.key\n  \
        verdict audit checkpoint --key audit.key --out checkpoint.json\n\n\
        Keep the checkpoint outside the database; `verdict audit verify --checkpoint` and \
        `verdict audit verify-checkpoint` check the chain against it later.")]
    Checkpoint(CheckpointArgs),
    /// Create an ed25519 key file for signing checkpoints and print its public key.
    #[command(after_help = "Example:\n  verdict audit keygen --out audit.key\n\n\
        The file is created readable by its owner only and never overwritten.")]
    Keygen(KeygenArgs),
    /// Check a checkpoint outside the database: its signature, and an exported chain if given.
    #[command(after_help = "Examples:\n  \
        verdict audit verify-checkpoint checkpoint.json --public-key 3b6a27bc...\n  \
        verdict audit export --out chain.jsonl\n  \
        verdict audit verify-checkpoint checkpoint.json --public-key 3b6a27bc... --events chain.jsonl\n\n\
        Exit status: 0 valid, 1 invalid, 2 could not check.")]
    VerifyCheckpoint(VerifyCheckpointArgs),
    /// Export the audit chain as JSON lines, one event per line.
    #[command(after_help = "Example:\n  verdict audit export --out chain.jsonl")]
    Export(ExportArgs),
}

/// Arguments of `verdict audit verify`.
#[derive(clap::Args)]
pub struct VerifyArgs {
    /// The store, the token, or the server to ask (`--server`; an operator's token then).
    /// With a token the walk is made as its principal, and only an operator may; without one,
    /// on a store opened here, whoever can open the store walks it.
    #[command(flatten)]
    common: crate::lifecycle_cmd::Common,
    /// Also check that the chain still holds the head this signed checkpoint vouches for.
    #[arg(long, value_name = "FILE", requires = "public_key")]
    checkpoint: Option<PathBuf>,
    /// The public key (64 hex digits) the checkpoint must be signed with.
    #[arg(long, value_name = "HEX")]
    public_key: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `verdict audit checkpoint`.
#[derive(clap::Args)]
pub struct CheckpointArgs {
    #[arg(long, value_name = "URL", help = STORE_HELP)]
    store: Option<String>,
    /// The signing key file (from `verdict audit keygen`).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// Where to write the checkpoint (default: standard output).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    local: crate::remote::StoreHere,
}

/// Arguments of `verdict audit keygen`.
#[derive(clap::Args)]
pub struct KeygenArgs {
    /// The key file to create.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    #[command(flatten)]
    local: crate::remote::NoServer,
}

/// Arguments of `verdict audit verify-checkpoint`.
#[derive(clap::Args)]
pub struct VerifyCheckpointArgs {
    /// The checkpoint file.
    checkpoint: PathBuf,
    /// The public key (64 hex digits) it must be signed with.
    #[arg(long, value_name = "HEX")]
    public_key: String,
    /// An exported chain (`verdict audit export`) to check and hold against the checkpoint.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    #[command(flatten)]
    local: crate::remote::NoServer,
}

/// Arguments of `verdict audit export`.
#[derive(clap::Args)]
pub struct ExportArgs {
    #[arg(long, value_name = "URL", help = STORE_HELP)]
    store: Option<String>,
    /// Where to write the chain (default: standard output).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    local: crate::remote::StoreHere,
}

/// Runs an audit command.
pub fn run(cmd: AuditCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        AuditCommand::Verify(args) => verify(&args),
        AuditCommand::Checkpoint(args) => sign(&args),
        AuditCommand::Keygen(args) => keygen(&args),
        AuditCommand::VerifyCheckpoint(args) => verify_checkpoint(&args),
        AuditCommand::Export(args) => export(&args),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Opens an existing store without migrating it: checking must not change what it checks.
async fn open(
    store: Option<&str>,
) -> anyhow::Result<(std::sync::Arc<dyn verdict_store::Store>, String)> {
    let location = Location::resolve(store)?;
    let name = location.redacted();
    if let Location::Sqlite(path) = &location
        && !path.exists()
    {
        bail!("{name}: no store there (run `verdict store migrate` to create one)");
    }
    let options = verdict_store::OpenOptions {
        migrate: false,
        max_connections: 2,
        ..verdict_store::OpenOptions::default()
    };
    let store = verdict_store::open_with(&location, &options)
        .await
        .with_context(|| format!("opening {name}"))?;
    Ok((store, name))
}

fn trusted_checkpoint(path: &Path, public_key: &str) -> anyhow::Result<Checkpoint> {
    let cp = Checkpoint::read(path)?;
    let key = checkpoint::parse_public_key(public_key)?;
    cp.verify(&key)
        .with_context(|| format!("checkpoint {}", path.display()))?;
    Ok(cp)
}

fn verify(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    if args.common.server.is_some() && args.checkpoint.is_some() {
        bail!(
            "--checkpoint cannot be sent to a server (--server): check the chain against a checkpoint where the store is, or export it (`verdict audit export`) and use `verdict audit verify-checkpoint --events`"
        );
    }
    let anchor = match (&args.checkpoint, &args.public_key) {
        (Some(path), Some(key)) => {
            let cp = trusted_checkpoint(path, key)?;
            Some(ChainHead {
                seq: cp.seq,
                hash: cp.head,
            })
        }
        _ => None,
    };
    let common = &args.common;
    if common.now.is_some() {
        bail!("--now has no meaning for audit verify: the walk reads what is stored");
    }
    let (report, name) = runtime()?.block_on(async {
        if let Some(remote) = crate::remote::client(common)? {
            /// The route's answer: the report, and the store the server walked.
            #[derive(serde::Deserialize)]
            struct Walked {
                store: String,
                #[serde(flatten)]
                report: verdict_store::AuditReport,
            }
            let w: Walked = remote.post_empty("v1/audit/verify").await?;
            return anyhow::Ok((w.report, w.store));
        }
        let (store, name) = open(common.store.as_deref()).await?;
        let engine = verdict_engine::Engine::new(store, verdict_engine::DEFAULT_GATE);
        // The engine's use case: the store's walk, then a replay of every stored decision; as
        // the token's principal when one is given (operators only, a refusal recorded).
        let report = match common.token()? {
            Some(token) => {
                let ctx = crate::lifecycle_cmd::Ctx::over(engine, Some(token));
                let caller = ctx.caller().await?;
                ctx.engine.verify_store_as(&caller, anchor.as_ref()).await?
            }
            None => engine
                .verify_store(anchor.as_ref())
                .await
                .context("verifying the audit chain and replaying its decisions")?,
        };
        anyhow::Ok((report, name))
    })?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else if report.is_intact() {
        let head = report.head.as_ref().map_or_else(
            || "empty chain".to_owned(),
            |h| format!("head seq {} {}", h.seq, h.hash),
        );
        outln!(
            "{name}: audit chain intact: {} events, {} rows re-hashed, {head}",
            report.events,
            report.rows
        )?;
    } else {
        outln!(
            "{name}: audit verify found {} problem(s) in {} events and {} rows:",
            report.problems.len(),
            report.events,
            report.rows
        )?;
        for p in &report.problems {
            outln!("  {p}")?;
        }
    }
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn sign(args: &CheckpointArgs) -> anyhow::Result<ExitCode> {
    let key = checkpoint::read_key_file(&args.key)?;
    let head = runtime()?.block_on(async {
        let (store, name) = open(args.store.as_deref()).await?;
        let report = store.verify_audit(None).await.context("verifying the audit chain")?;
        if !report.is_intact() {
            bail!(
                "{name}: refusing to sign a damaged chain ({} problem(s); run `verdict audit verify`)",
                report.problems.len()
            );
        }
        report.head.ok_or_else(|| anyhow::anyhow!("{name}: the audit chain is empty; nothing to sign"))
    })?;
    let cp = Checkpoint::sign(&key, &head);
    write_out(args.out.as_deref(), cp.to_json().as_bytes())?;
    eprintln!("signed checkpoint of seq {} head {}", cp.seq, cp.head);
    Ok(ExitCode::SUCCESS)
}

fn keygen(args: &KeygenArgs) -> anyhow::Result<ExitCode> {
    let key = checkpoint::generate_key()?;
    checkpoint::write_key_file(&args.out, &key)?;
    outln!("{}", checkpoint::hex(key.verifying_key().as_bytes()))?;
    Ok(ExitCode::SUCCESS)
}

fn verify_checkpoint(args: &VerifyCheckpointArgs) -> anyhow::Result<ExitCode> {
    let cp = match trusted_checkpoint(&args.checkpoint, &args.public_key) {
        Ok(cp) => cp,
        Err(e) => {
            outln!("invalid: {e:#}")?;
            return Ok(ExitCode::from(1));
        }
    };
    let Some(path) = &args.events else {
        outln!(
            "valid: checkpoint of seq {} head {} signed by {}",
            cp.seq,
            cp.head,
            cp.public_key
        )?;
        return Ok(ExitCode::SUCCESS);
    };
    let events = read_events(path)?;
    let mut problems: Vec<String> = verdict_store::audit::check_chain(&events)
        .iter()
        .map(ToString::to_string)
        .collect();
    match events.iter().find(|e| e.seq == cp.seq) {
        Some(e) if e.hash == cp.head => {}
        Some(e) => problems.push(format!(
            "seq {} table {}: checkpoint vouches for hash {}, the exported chain has {}",
            cp.seq, e.table, cp.head, e.hash
        )),
        None => problems.push(format!(
            "seq {}: the exported chain does not reach the checkpoint",
            cp.seq
        )),
    }
    if problems.is_empty() {
        outln!(
            "valid: checkpoint of seq {} holds; exported chain of {} events intact",
            cp.seq,
            events.len()
        )?;
        Ok(ExitCode::SUCCESS)
    } else {
        outln!("invalid: {} problem(s):", problems.len())?;
        for p in problems {
            outln!("  {p}")?;
        }
        Ok(ExitCode::from(1))
    }
}

fn read_events(path: &Path) -> anyhow::Result<Vec<AuditEvent>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut events = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let value = verdict_core::json::parse(line.as_bytes())
            .with_context(|| format!("{} line {}", path.display(), n + 1))?;
        let event: AuditEvent = serde_json::from_value(value)
            .with_context(|| format!("{} line {}", path.display(), n + 1))?;
        events.push(event);
    }
    events.sort_by_key(|e| e.seq);
    Ok(events)
}

fn export(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let mut text = Vec::new();
    runtime()?.block_on(async {
        let (store, _) = open(args.store.as_deref()).await?;
        let mut after = 0;
        loop {
            let page = store.audit_events(after, 5000).await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for e in &page {
                serde_json::to_writer(&mut text, e)?;
                text.push(b'\n');
            }
        }
        anyhow::Ok(())
    })?;
    write_out(args.out.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn write_out(path: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    match path {
        Some(path) => {
            // Write beside the target, then rename: a reader never sees half a file.
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
        }
        None => crate::out::write_all(bytes)?,
    }
    Ok(())
}
