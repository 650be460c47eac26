//! `--server URL` (or `VERDICT_SERVER`): the lifecycle commands that have a route are sent to
//! a running `verdict serve` through its client ([`verdict_server::client`]) instead of opening
//! the store here. Each command renders the answer as it renders the local use case's.

use crate::lifecycle_cmd::Common;
use anyhow::{Result, bail};
pub(crate) use verdict_server::client::{Client, segment};

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
    Ok(Some(Client::new(server, common.token.clone())?))
}

/// Refuses a command that works only on a store opened here.
pub(crate) fn refuse_remote(common: &Common, why: &str) -> Result<()> {
    if common.server.is_some() {
        bail!("this command cannot run against a server (--server / VERDICT_SERVER): {why}");
    }
    Ok(())
}
