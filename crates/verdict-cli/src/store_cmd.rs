//! `verdict store`: manage the evidence store itself.

use anyhow::Context as _;
use std::process::ExitCode;
use verdict_store::Location;

const STORE_HELP: &str = "Store: sqlite:PATH or postgres://USER@HOST:PORT/DB \
    [default: $VERDICT_STORE, else $VERDICT_HOME/verdict.db, else ./.verdict/verdict.db]";

/// Store commands.
#[derive(clap::Subcommand)]
pub enum StoreCommand {
    /// Create or upgrade the store's schema; on PostgreSQL also its owner and principal roles.
    #[command(after_help = "Examples:\n  \
        verdict store migrate\n  \
        verdict store migrate --store sqlite:/var/lib/verdict/verdict.db\n  \
        verdict store migrate --store postgres://postgres@db:5432/verdict --role-prefix verdict_\n\n\
        Running it again changes nothing. A store whose schema is newer than this binary is \
        refused. On PostgreSQL, run it as a superuser, or as a role with CREATEROLE that may \
        create a schema in the database (its owner, say): it creates NOLOGIN roles \
        <prefix>owner, <prefix>operator, <prefix>producer, <prefix>runner, <prefix>verifier, \
        <prefix>human, <prefix>gate, <prefix>system, <prefix>service and <prefix>engine, makes \
        the connecting \
        role a member of each, gives <prefix>owner CREATEROLE (it makes a NOLOGIN role for \
        every principal added, which <prefix>service may act as), and builds the schema as \
        <prefix>owner. Roles belong to the whole cluster, so each store needs a prefix of its \
        own: the first migration marks the prefix as this database's (a comment on \
        <prefix>owner), and migrating another database of the cluster with it is refused.")]
    Migrate(MigrateArgs),
}

/// Arguments of `verdict store migrate`.
#[derive(clap::Args)]
pub struct MigrateArgs {
    #[arg(long, value_name = "URL", help = STORE_HELP)]
    store: Option<String>,
    /// PostgreSQL: prefix of the database role names (default verdict_; one per store of a
    /// cluster; a migrated database keeps the prefix it was created with).
    #[arg(long, value_name = "PREFIX")]
    role_prefix: Option<String>,
    #[command(flatten)]
    local: crate::remote::StoreHere,
}

/// Runs a store command.
pub fn run(cmd: StoreCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        StoreCommand::Migrate(args) => migrate(&args),
    }
}

fn migrate(args: &MigrateArgs) -> anyhow::Result<ExitCode> {
    let location = Location::resolve(args.store.as_deref())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let report = runtime
        .block_on(verdict_store::migrate(
            &location,
            args.role_prefix.as_deref(),
        ))
        .with_context(|| format!("migrating {}", location.redacted()))?;
    // Opened again to say where it is, with the role prefix on PostgreSQL.
    let store = runtime
        .block_on(verdict_store::open(&location))
        .with_context(|| format!("opening {}", location.redacted()))?;
    if report.from == report.to {
        outln!(
            "{}: schema version {} is current",
            store.describe(),
            report.to
        )?;
    } else {
        outln!(
            "{}: migrated schema version {} -> {}",
            store.describe(),
            report.from,
            report.to
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
