//! `--server URL` (or `VERDICT_SERVER`): the commands that have a route are sent to a running
//! `verdict serve` through its client ([`verdict_server::client`]) instead of opening the store
//! here. Each command renders the answer through the same function as the local use case's.
//!
//! Every command accepts `--server`. One that works only here refuses it with a one-line
//! reason naming the command: those that take the store's options through
//! [`Common`](crate::lifecycle_cmd::Common) when they would open the store
//! ([`refuse_remote`]), the others through [`StoreHere`] or [`NoServer`] before they start
//! ([`refusal`]).

use crate::lifecycle_cmd::Common;
use anyhow::{Result, bail};
use clap::ArgMatches;
use std::sync::OnceLock;
pub(crate) use verdict_server::client::{Client, segment};

/// The id of the `--server` of a command that works only here (not `Common`'s `server`).
pub(crate) const LOCAL_SERVER: &str = "local_server";

/// `--server` / `VERDICT_SERVER` on a command that works on a store opened here: accepted so
/// that it can be refused with the reason ([`refusal`]).
#[derive(clap::Args, Clone, Default)]
pub struct StoreHere {
    /// Refused: this command works on a store opened here.
    #[arg(
        id = "local_server",
        long = "server",
        env = "VERDICT_SERVER",
        hide = true,
        hide_env_values = true,
        value_name = "URL"
    )]
    server: Option<String>,
}

/// `--server` on a command that reads no store at all (local files, built-in schemas): the
/// option is refused with the reason ([`refusal`]); `VERDICT_SERVER` in the environment is
/// not the caller asking for a server here, so it is left alone.
#[derive(clap::Args, Clone, Default)]
pub struct NoServer {
    /// Refused: this command reads no store and never talks to a server.
    #[arg(id = "local_server", long = "server", hide = true, value_name = "URL")]
    server: Option<String>,
}

/// Why each command that works only here does, by its path (`store migrate`).
pub(crate) const LOCAL_ONLY: &[(&str, &str)] = &[
    (
        "check",
        "it runs a check spec against the live system from here; send the evidence it writes with `evidence add --server`",
    ),
    (
        "gate evaluate",
        "it evaluates a bundle file here and reads no store",
    ),
    ("digest", "it digests local files and reads no store"),
    (
        "schema",
        "it prints a schema built into this binary and reads no store",
    ),
    (
        "judge render",
        "it renders a request file here and reads no store",
    ),
    (
        "store migrate",
        "it creates or upgrades the schema of a store opened here",
    ),
    (
        "audit checkpoint",
        "it signs the chain's head with a key file kept here, reading the store directly",
    ),
    ("audit keygen", "it writes a key file here"),
    (
        "audit verify-checkpoint",
        "it checks a checkpoint file here and reads no store",
    ),
    (
        "audit export",
        "it reads the whole chain from a store opened here",
    ),
    (
        "serve",
        "it serves a store opened here; give its URL to the commands that use --server",
    ),
    (
        "key generate",
        "signing keys are made and kept here, never sent to a server",
    ),
    (
        "key export",
        "signing keys are kept here, never sent to a server",
    ),
    (
        "attest verify",
        "it checks an attestation file here against public keys given here",
    ),
    (
        "completions",
        "it prints a completion script and reads no store",
    ),
    ("man", "it writes manual pages and reads no store"),
];

/// The command being run (`principal list`), for refusals.
static COMMAND: OnceLock<String> = OnceLock::new();

/// The path of subcommand names `matches` selects, and the innermost one's matches.
pub(crate) fn command_path(matches: &ArgMatches) -> (String, &ArgMatches) {
    let mut names = Vec::new();
    let mut leaf = matches;
    while let Some((name, sub)) = leaf.subcommand() {
        names.push(name.to_owned());
        leaf = sub;
    }
    (names.join(" "), leaf)
}

/// Records the command being run and, when it works only here and `--server` (or
/// `VERDICT_SERVER`, for one that would open a store) was given, the refusal to print.
pub(crate) fn refusal(matches: &ArgMatches) -> Option<String> {
    let (path, leaf) = command_path(matches);
    let _ = COMMAND.set(path.clone());
    let given = leaf
        .try_get_one::<String>(LOCAL_SERVER)
        .ok()
        .flatten()
        .is_some();
    if !given {
        return None;
    }
    let why = LOCAL_ONLY
        .iter()
        .find(|(p, _)| *p == path)
        .map_or("it works only here", |(_, why)| why);
    Some(refused(&path, why))
}

fn refused(command: &str, why: &str) -> String {
    format!("verdict {command} cannot run against a server (--server / VERDICT_SERVER): {why}")
}

/// The server named by `--server`, or `None` to work on the store directly. `--server` with
/// `--store`, or with `--now` (the server's store keeps its own time), is refused.
pub(crate) fn client(common: &Common) -> Result<Option<Client>> {
    let Some(server) = common.server.as_deref() else {
        return Ok(None);
    };
    if common.store.is_some() {
        bail!(
            "give --server (VERDICT_SERVER) or --store (VERDICT_STORE), not both: with --server the server's own store is used"
        );
    }
    if common.now.is_some() {
        bail!(
            "--now cannot be sent to a server (--server): the server's store takes every time from its own clock"
        );
    }
    Ok(Some(Client::new(server, common.token()?)?))
}

/// Refuses a command that works only on a store opened here, naming it.
pub(crate) fn refuse_remote(common: &Common, why: &str) -> Result<()> {
    if common.server.is_some() {
        let command = COMMAND.get().map_or("this command", String::as_str);
        bail!("{}", refused(command, why));
    }
    Ok(())
}
